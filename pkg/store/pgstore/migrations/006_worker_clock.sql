-- How far the server's clock was ahead of the clock of the host that last
-- wrote a worker record, in milliseconds: statement_timestamp() minus the
-- writer's time when it sent the write. The record's times are in the
-- writer's clock; a reader moves them by this lag less its own, into its
-- own clock, so that a host whose clock is off makes no live worker look
-- stale elsewhere (docs/postgres.md). null: written before this migration.
ALTER TABLE workers ADD COLUMN clock_lag_ms bigint;
