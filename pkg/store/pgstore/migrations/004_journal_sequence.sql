-- Journal numbers without a lock held through the commit (issue 17's
-- throughput target): they come from one sequence instead of the team's
-- row in teams, whose lock made every change of a team wait for the
-- previous one's commit to reach the disk. A team's numbers still grow in
-- the order the changes took them, but no longer without gaps (other teams'
-- records, rolled-back changes), and a change may commit before one with a
-- smaller number: readers wait out a gap until every transaction that
-- could still fill it has ended (pgstore's follower; docs/postgres.md).
CREATE SEQUENCE journal_seq;
SELECT setval('journal_seq', coalesce((SELECT max(seq) FROM journal), 0) + 1, false);
ALTER TABLE teams DROP COLUMN next_seq;

-- NOTIFY moves out of the writing transaction: in PostgreSQL 15 and
-- earlier a transaction that has notified holds a database-wide lock until
-- its commit has reached the disk, which serialized every commit. pgstore
-- now notifies in a transaction of its own right after the commit, in the
-- same round trip (notifyAfter in journal.go).
DROP TRIGGER journal_notify ON journal;
DROP FUNCTION journal_notify();
