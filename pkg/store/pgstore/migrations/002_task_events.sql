-- Journal records of task changes built by the statement that makes the
-- change, so that a claim or a complete is one statement: the same bytes
-- as pg-queue's Go encoding of protocol.TaskEvent (field order, omitted
-- empty fields, times as RFC 3339 with trailing zeros dropped).

-- rfc3339 is a time as Go's encoding/json writes it in UTC.
CREATE FUNCTION rfc3339(ts timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
		|| rtrim(rtrim(to_char(ts AT TIME ZONE 'UTC', '.US'), '0'), '.') || 'Z'
$$;

-- rfc3339s is a time to the second, as Go's time.RFC3339 writes it in UTC.
CREATE FUNCTION rfc3339s(ts timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;

-- task_event is a {"type":"task",...} journal record. reason is JSON text
-- (a string encoded by the caller), or null for none.
CREATE FUNCTION task_event(ts timestamptz, op text, task text, worker text, token bigint, status text, reason json)
RETURNS text LANGUAGE sql STABLE AS $$
	SELECT '{"type":"task","ts":"' || rfc3339(ts) || '","op":' || to_json(op)::text
		|| ',"task":' || to_json(task)::text
		|| CASE WHEN coalesce(worker, '') <> '' THEN ',"worker":' || to_json(worker)::text ELSE '' END
		|| CASE WHEN coalesce(token, 0) <> 0 THEN ',"token":' || token::text ELSE '' END
		|| CASE WHEN coalesce(status, '') <> '' THEN ',"status":' || to_json(status)::text ELSE '' END
		|| CASE WHEN reason IS NOT NULL AND reason::text <> '""' THEN ',"reason":' || reason::text ELSE '' END
		|| '}'
$$;

-- team_channel is the LISTEN/NOTIFY channel of a team: powerglide:<team>,
-- or a hash of the name when that is longer than an identifier may be.
CREATE FUNCTION team_channel(team text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE WHEN octet_length('powerglide:' || team) > 63
		THEN 'powerglide:' || left(encode(sha256(convert_to(team, 'UTF8')), 'hex'), 32)
		ELSE 'powerglide:' || team END
$$;

-- Every insert into the journal wakes the team's listeners once, with the
-- last number, when the transaction commits.
CREATE FUNCTION journal_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify(team_channel(n.team), max(n.seq)::text) FROM new_rows n GROUP BY n.team;
	RETURN NULL;
END
$$;

CREATE TRIGGER journal_notify AFTER INSERT ON journal
	REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION journal_notify();
