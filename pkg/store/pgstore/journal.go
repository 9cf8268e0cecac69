package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/store"
)

// journal is a team's event log: the journal table, numbered per team.
type journal struct {
	s    *Store
	team string
}

var _ store.Journal = (*journal)(nil)

// record is one journal record: its JSON and its op, if it has one.
type record struct {
	data []byte
	op   string
}

// appendSQL numbers the records from journal_seq and inserts them in
// order. The transaction must have its xid before it takes a number (see
// follower): queueAppend asks for it first.
const appendSQL = `INSERT INTO journal (team, seq, op, record)
	SELECT $1, nextval('journal_seq'), nullif(o.op, ''), o.rec::json
	FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS o(rec, op, n) ORDER BY o.n`

// appendEvents is the end of a statement that appends the rows of a CTE
// events(ord, op, rec) to the journal of team $1, in ord order. The rows
// of events come from the rows the statement changed, so the transaction
// has its xid before it takes a number.
const appendEvents = `,
	jr AS (
		INSERT INTO journal (team, seq, op, record)
		SELECT $1, nextval('journal_seq'), ev.op, ev.rec::json FROM (SELECT * FROM events ORDER BY ord) ev)`

// assignXID gives the transaction its xid (before appendSQL numbers).
const assignXID = "SELECT pg_current_xact_id()"

// ensureTeam records the team in teams (Exists), once.
const ensureTeam = "INSERT INTO teams (team) VALUES ($1) ON CONFLICT DO NOTHING"

func appendArgs(team string, recs []record) []any {
	data, ops := make([]string, len(recs)), make([]string, len(recs))
	for i, r := range recs {
		data[i], ops[i] = string(r.data), r.op
	}
	return []any{team, data, ops}
}

// queueAppend queues the append of records to a batch that commits right
// after it (records the team in teams, gives the transaction its xid,
// appends): three results to read.
func queueAppend(b *pgx.Batch, team string, recs []record) {
	b.Queue(ensureTeam, team)
	b.Queue(assignXID)
	b.Queue(appendSQL, appendArgs(team, recs)...)
}

// Append adds records (each marshalled to one JSON object) in order.
func (j *journal) Append(ctx context.Context, records ...any) error {
	if len(records) == 0 {
		return nil
	}
	recs := make([]record, len(records))
	for i, r := range records {
		b, err := jsonl.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode journal record: %w", err)
		}
		b = bytes.TrimSuffix(b, []byte{'\n'})
		if len(b) == 0 || b[0] != '{' {
			return fmt.Errorf("journal record %d is not a JSON object", i+1)
		}
		var head struct {
			Op string `json:"op"`
		}
		json.Unmarshal(b, &head)
		recs[i] = record{data: secrets.Redact(b), op: head.Op}
	}
	tx, err := j.s.beginTxn(ctx)
	if err != nil {
		return err
	}
	defer tx.end()
	return tx.commit(ctx, j.team, recs)
}
