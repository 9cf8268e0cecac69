package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

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

// appendSQL numbers the records from the team's counter row (its lock
// orders the commits of the team's changes as their numbers) and inserts
// them; the journal's trigger notifies the team's channel.
const appendSQL = `WITH c AS (
		INSERT INTO teams AS tm (team, next_seq) VALUES ($1, 1 + cardinality($2::text[]))
		ON CONFLICT (team) DO UPDATE SET next_seq = tm.next_seq + cardinality($2::text[])
		RETURNING tm.next_seq - cardinality($2::text[]) AS first)
	INSERT INTO journal (team, seq, op, record)
	SELECT $1, c.first + o.n - 1, nullif(o.op, ''), o.rec::json
	FROM c, unnest($2::text[], $3::text[]) WITH ORDINALITY AS o(rec, op, n)`

// appendEvents is the end of a statement that appends the rows of a CTE
// events(ord, op, rec) to the journal of team $1, in ord order.
const appendEvents = `,
	ev AS (SELECT op, rec, row_number() OVER (ORDER BY ord) AS n, count(*) OVER () AS total FROM events),
	ctr AS (
		INSERT INTO teams AS tm (team, next_seq) SELECT $1, 1 + count(*) FROM events HAVING count(*) > 0
		ON CONFLICT (team) DO UPDATE SET next_seq = tm.next_seq + excluded.next_seq - 1
		RETURNING tm.next_seq AS after),
	jr AS (
		INSERT INTO journal (team, seq, op, record)
		SELECT $1, ctr.after - ev.total + ev.n - 1, ev.op, ev.rec::json FROM ctr, ev
		RETURNING seq)`

func appendArgs(team string, recs []record) []any {
	data, ops := make([]string, len(recs)), make([]string, len(recs))
	for i, r := range recs {
		data[i], ops[i] = string(r.data), r.op
	}
	return []any{team, data, ops}
}

// queueAppend queues the append of records to a batch that commits right
// after it: the team's row stays locked until the commit.
func queueAppend(b *pgx.Batch, team string, recs []record) {
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
	if _, err := j.s.pool.Exec(ctx, appendSQL, appendArgs(j.team, recs)...); err != nil {
		return fmt.Errorf("append to the journal of team %s: %w", j.team, err)
	}
	return nil
}

// Follow returns the records appended after the call (all of them with
// fromStart), in order: it catches up by number and sleeps on the team's
// channel, on a connection of its own that it opens again after a server
// restart, resuming after the last number it returned.
func (j *journal) Follow(ctx context.Context, fromStart bool) (store.Follower, error) {
	f := &follower{s: j.s, team: j.team, l: newListener(j.s.cfg.ConnConfig, channel(j.team))}
	f.ctx, f.cancel = context.WithCancel(ctx)
	// Listen first, so that nothing appended after the mark is missed
	// for want of a wake-up.
	if err := f.l.listen(ctx); err != nil {
		f.cancel()
		return nil, connectErr(j.s.cfg, err)
	}
	if !fromStart {
		if err := j.s.pool.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM journal WHERE team = $1", j.team).Scan(&f.last); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

type follower struct {
	mu     sync.Mutex // Next and Close
	s      *Store
	team   string
	l      *listener
	last   int64 // the number of the last record returned
	buf    [][]byte
	ctx    context.Context
	cancel context.CancelFunc
}

// catchUpBatch bounds the records one query reads.
const catchUpBatch = 1000

// Next returns the next record, waiting for it.
func (f *follower) Next(ctx context.Context) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		if len(f.buf) > 0 {
			b := f.buf[0]
			f.buf = f.buf[1:]
			return b, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := f.ctx.Err(); err != nil {
			return nil, err
		}
		if f.fill(ctx) {
			continue
		}
		wctx, stop := context.WithCancel(ctx)
		go func() { // the follower's own context ends the wait too
			select {
			case <-f.ctx.Done():
			case <-wctx.Done():
			}
			stop()
		}()
		err := f.l.wait(wctx, time.Second)
		stop()
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// fill reads the records after the last one; false when there are none
// or the server cannot be reached (Next waits and tries again).
func (f *follower) fill(ctx context.Context) bool {
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rows, _ := f.s.pool.Query(qctx, `SELECT seq, record FROM journal WHERE team = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
		f.team, f.last, catchUpBatch)
	var seq int64
	var rec []byte
	last := f.last
	var got [][]byte
	_, err := pgx.ForEachRow(rows, []any{&seq, &rec}, func() error {
		got = append(got, bytes.Clone(rec))
		last = seq
		return nil
	})
	if err != nil {
		return false // keep what we have: the rows are read again
	}
	f.buf, f.last = got, last
	return len(got) > 0
}

// Close stops the follower.
func (f *follower) Close() error {
	f.cancel() // ends a Next that waits
	f.mu.Lock()
	defer f.mu.Unlock()
	f.l.close()
	return nil
}
