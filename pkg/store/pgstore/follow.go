package pgstore

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/store"
)

// Follow returns the records appended after the call (all of them with
// fromStart), in order: it catches up by number and sleeps on the team's
// channel, on a connection of its own that it opens again after a server
// restart, resuming after the last number it returned.
//
// "After the call": every change that begins after it. A change in flight
// during the call whose number is below the newest record the call saw
// is left out, as an append to a file that lands before a reader's mark.
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

// follower reads a team's records in the order of their numbers.
//
// The numbers come from one sequence (journal_seq) and are taken before
// the change commits, so they have gaps (other teams' records, rolled-back
// changes) and a change may commit after one with a bigger number. A
// follower that passed a number still being committed would lose that
// record. So at a gap it waits until every transaction that could still
// fill it has ended. Every change has its transaction id (xid) before it
// takes a number, so whatever holds a number missing below a record seen
// in a snapshot got its xid before that snapshot. The follower then asks
// for an xid of its own (next): bigger than all of those. Once a later
// snapshot's xmin (the oldest xid still running) reaches next, they have
// all ended, and a number still missing below the record is a hole for
// good.
type follower struct {
	mu     sync.Mutex // Next and Close
	s      *Store
	team   string
	l      *listener
	last   int64 // the number of the last record returned
	buf    [][]byte
	ctx    context.Context
	cancel context.CancelFunc

	// safe: every number up to it is either read or a hole for good.
	safe int64
	// hold is the gap the follower waits at, when it waits at one.
	hold *gapHold
	// backoff is the wait before looking again at a held gap.
	backoff time.Duration
}

// gapHold is a gap seen in a snapshot: what is missing below upTo (the
// newest number that snapshot showed) is settled once no xid below next
// runs.
//
// holders narrows that wait: the xids of the transactions that held a
// write lock on the journal once the hold had lasted holdersAfter (a
// transaction takes that lock before its number, and keeps it to its
// end). Every transaction that
// could still fill the gap is among them, so the gap is settled too once
// none of them runs, whatever other long transaction (a psql session left
// open, another program's batch job on the same server) keeps xmin back.
// known: holders could be read.
type gapHold struct {
	upTo    int64
	next    uint64
	holders []string
	known   bool
	since   time.Time // when the hold began
}

// catchUpBatch bounds the records one query reads.
const catchUpBatch = 1000

// maxGapWait is the longest wait between two looks at a gap: transactions
// that hold one usually end within milliseconds, and do not notify when
// they roll back or belong to another team.
const maxGapWait = 100 * time.Millisecond

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
		wait := time.Second
		if f.hold != nil {
			f.backoff = min(max(2*f.backoff, time.Millisecond), maxGapWait)
			wait = f.backoff
		}
		wctx, stop := context.WithCancel(ctx)
		go func() { // the follower's own context ends the wait too
			select {
			case <-f.ctx.Done():
			case <-wctx.Done():
			}
			stop()
		}()
		err := f.l.wait(wctx, wait)
		stop()
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// fillSQL reads the records after $2 with the xmin of the snapshot the
// read used, and whether that snapshot shows every xid of $4 ended.
const fillSQL = `SELECT pg_snapshot_xmin(s.snap)::text,
		NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(s.snap) r WHERE xid(r) = ANY ($4::text[]::xid[])),
		j.seq, j.record
	FROM (SELECT pg_current_snapshot() AS snap) s
	LEFT JOIN LATERAL (SELECT seq, record FROM journal WHERE team = $1 AND seq > $2 ORDER BY seq LIMIT $3) j ON true
	ORDER BY j.seq`

// fill reads the records after the last one, up to the first gap it may
// not pass yet; false when there are none or the server cannot be
// reached (Next waits and tries again).
func (f *follower) fill(ctx context.Context) bool {
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	defer context.AfterFunc(f.ctx, cancel)() // Close ends the read too
	var holders []string
	if f.hold != nil {
		holders = f.hold.holders
	}
	rows, _ := f.s.pool.Query(qctx, fillSQL, f.team, f.last, catchUpBatch, holders)
	var xminText string
	var holdersEnded bool
	var seq *int64
	var rec []byte
	type row struct {
		seq int64
		rec []byte
	}
	var got []row
	_, err := pgx.ForEachRow(rows, []any{&xminText, &holdersEnded, &seq, &rec}, func() error {
		if seq != nil {
			got = append(got, row{*seq, bytes.Clone(rec)})
		}
		return nil
	})
	if err != nil {
		return false // keep what we have: the rows are read again
	}
	xmin, err := strconv.ParseUint(xminText, 10, 64)
	if err != nil {
		return false
	}
	if f.hold != nil && (xmin >= f.hold.next || f.hold.known && holdersEnded) {
		f.safe = max(f.safe, f.hold.upTo) // the holders have ended
		f.hold = nil
	} else if f.hold != nil && !f.hold.known && time.Since(f.hold.since) >= holdersAfter {
		f.readHolders(qctx) // the next look checks them
	}
	last, n := f.last, 0
	for _, r := range got {
		if r.seq != last+1 && r.seq > f.safe {
			if f.hold == nil {
				f.holdGap(qctx, got[len(got)-1].seq)
			}
			break
		}
		last = r.seq
		n++
	}
	if n == 0 {
		return false
	}
	for _, r := range got[:n] {
		f.buf = append(f.buf, r.rec)
	}
	f.last, f.backoff = last, 0
	if f.hold != nil && f.hold.upTo <= last {
		f.hold = nil
	}
	return true
}

// holdGap starts waiting at a gap below upTo, the newest number the read
// that found it saw: it takes an xid (in a transaction of its own, begun
// after that read) to know when every transaction that could fill the gap
// has ended.
func (f *follower) holdGap(ctx context.Context, upTo int64) {
	var next string
	if err := f.s.pool.QueryRow(ctx, "SELECT pg_current_xact_id()::text").Scan(&next); err != nil {
		return // look again later
	}
	n, err := strconv.ParseUint(next, 10, 64)
	if err != nil {
		return
	}
	f.hold = &gapHold{upTo: upTo, next: n, since: time.Now()}
}

// holdersAfter is how long a gap is held before the follower reads its
// holders: most gaps end sooner, and pg_locks is not free to read.
const holdersAfter = 20 * time.Millisecond

// holdersSQL reads the xids of the transactions that hold a write lock on
// the journal (gapHold's holders; a subtransaction's xid comes with its
// top transaction's, which decides).
const holdersSQL = `SELECT coalesce(array_agg(DISTINCT x.transactionid::text), '{}')
	FROM pg_locks r JOIN pg_locks x ON x.virtualtransaction = r.virtualtransaction AND x.locktype = 'transactionid'
	WHERE r.locktype = 'relation' AND r.relation = 'journal'::regclass AND r.mode = 'RowExclusiveLock'
	  AND r.database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// readHolders notes the holders of the gap held (read after the snapshot
// that found the gap, they include every transaction that could still
// fill it).
func (f *follower) readHolders(ctx context.Context) {
	var holders []string
	if err := f.s.pool.QueryRow(ctx, holdersSQL).Scan(&holders); err != nil {
		return // wait for xmin alone
	}
	f.hold.holders, f.hold.known = holders, true
}

// Close stops the follower.
func (f *follower) Close() error {
	f.cancel() // ends a Next that waits
	f.mu.Lock()
	defer f.mu.Unlock()
	f.l.close()
	return nil
}
