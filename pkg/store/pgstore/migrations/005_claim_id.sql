-- The claim id a client chose for a claim (the store agent's client), so
-- that a client whose claim's answer was lost finds that exact claim
-- again instead of guessing it by worker name and time (docs/store-agent.md).
-- Set by each claim (NULL for a claim without one), kept by renewals.
ALTER TABLE tasks ADD COLUMN claim_id text;
