-- The team store (issue 17): a team's tasks, journal, worker records and
-- budget ledger. docs/postgres.md describes every table for psql users.

-- One row per team: the counter that numbers its journal. Every change
-- takes this row's lock while it appends its events, so the events of a
-- team commit in the order of their numbers.
CREATE TABLE teams (
	team       text PRIMARY KEY,
	next_seq   bigint NOT NULL DEFAULT 1,
	created_at timestamptz NOT NULL DEFAULT now()
);

-- Fencing tokens: one sequence, so a token grows across the whole team
-- (and across every team of the database).
CREATE SEQUENCE task_token;

-- The tasks, live and archived. The columns hold what changes; spec holds
-- the task as it was added (title, prompt, labels, verify, fields added by
-- hand or by newer versions), exactly as pg-queue prints it.
CREATE TABLE tasks (
	team         text NOT NULL,
	id           text NOT NULL,
	seq          bigserial,              -- queue order: the order of adds
	status       text NOT NULL CHECK (status IN ('pending', 'claimed', 'done', 'failed', 'cancelled')),
	priority     integer NOT NULL,
	depends_on   text[] NOT NULL,
	attempts     integer NOT NULL,
	max_attempts integer NOT NULL,
	worker       text,                   -- the claim, when there is one
	token        bigint,
	lease_until  timestamptz,
	result       json,
	error        text,
	created_at   timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL,
	archived_at  timestamptz,            -- set: moved out of the live queue
	spec         json NOT NULL,
	PRIMARY KEY (team, id)
);

-- A claim looks at the live, unfinished tasks in priority-then-age order.
CREATE INDEX tasks_claimable ON tasks (team, priority DESC, seq)
	WHERE status IN ('pending', 'claimed') AND archived_at IS NULL;
-- Claimable tasks out of attempts fail on the way.
CREATE INDEX tasks_spent ON tasks (team)
	WHERE status IN ('pending', 'claimed') AND attempts >= max_attempts AND archived_at IS NULL;
CREATE INDEX tasks_worker ON tasks (team, worker) WHERE status = 'claimed';
CREATE INDEX tasks_live ON tasks (team, seq) WHERE archived_at IS NULL;

-- The final status of pruned tasks that live tasks still depend on.
CREATE TABLE pruned (
	team   text NOT NULL,
	id     text NOT NULL,
	status text NOT NULL,
	PRIMARY KEY (team, id)
);

-- deps_done: every task of deps is done (live, archived, or pruned).
CREATE FUNCTION deps_done(t text, deps text[]) RETURNS boolean
LANGUAGE sql STABLE AS $$
	SELECT NOT EXISTS (
		SELECT 1 FROM unnest(deps) AS d(id)
		WHERE NOT EXISTS (SELECT 1 FROM tasks x WHERE x.team = t AND x.id = d.id AND x.status = 'done')
		  AND NOT EXISTS (SELECT 1 FROM pruned p WHERE p.team = t AND p.id = d.id AND p.status = 'done'))
$$;

-- The journal: events.jsonl of the team directory, one record per row,
-- numbered per team without gaps.
CREATE TABLE journal (
	team   text NOT NULL,
	seq    bigint NOT NULL,
	ts     timestamptz NOT NULL DEFAULT now(),
	op     text,                 -- the record's op, for queries
	record json NOT NULL,
	PRIMARY KEY (team, seq)
);
CREATE INDEX journal_completed ON journal (team, ts) WHERE op = 'complete';

-- Worker records (worker-N.json) and the operator's velocity setting
-- (worker-N.velocity). record is null for a worker with only a velocity.
CREATE TABLE workers (
	team         text NOT NULL,
	worker       text NOT NULL,
	host         text,
	heartbeat_at timestamptz,
	record       json,
	velocity     double precision,
	updated_at   timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (team, worker)
);

-- The team budget's ledger (budget.json).
CREATE TABLE budgets (
	team       text PRIMARY KEY,
	document   json,             -- null: a row locked before the first write
	updated_at timestamptz NOT NULL DEFAULT now()
);
