package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
)

func newID() string { return "t-" + ulid.Make().String() }

// WaitClaim is Claim that waits up to wait for a claimable task: it looks
// again when the team's channel announces a change, and at least every
// second (leases expire with time alone). ErrNothing when wait ran out;
// ctx's error when ctx ends.
func (q *tasks) WaitClaim(ctx context.Context, worker string, lease, wait time.Duration) (*protocol.Task, error) {
	deadline := time.Now().Add(wait)
	id := queue.ClaimID(ctx)
	var w *wakeup
	for {
		var woken <-chan struct{}
		if w != nil {
			woken = w.current()
		}
		t, err := q.claim(worker, lease, id)
		if !errors.Is(err, queue.ErrNothing) || !time.Now().Before(deadline) {
			return t, err
		}
		if w == nil { // listen, then look once more before waiting
			var release func()
			w, release = q.s.subscribe(q.team)
			defer release()
			select {
			case <-w.ready:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		if q.s.onWait != nil {
			q.s.onWait()
		}
		timer := time.NewTimer(min(time.Second, time.Until(deadline)))
		select {
		case <-woken:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
		timer.Stop()
	}
}

// List returns the live tasks in queue order, after the archived ones
// (oldest archived first) with Archived.
func (q *tasks) List(opts queue.ListOptions) ([]protocol.Task, error) {
	if err := queue.CheckStatuses(opts.Status); err != nil {
		return nil, err
	}
	ctx, cancel := opContext()
	defer cancel()
	statuses := opts.Status
	if statuses == nil {
		statuses = []string{}
	}
	rows, _ := q.s.pool.Query(ctx, `SELECT `+taskCols+`, `+blocked+` FROM tasks t
		WHERE t.team = $1 AND ($2::bool OR t.archived_at IS NULL)
		  AND ($3::text = '' OR (t.status = 'claimed' AND t.worker = $3))
		  AND (cardinality($4::text[]) = 0 OR t.status = ANY($4) OR ('blocked' = ANY($4) AND `+blocked+`))
		ORDER BY t.archived_at IS NULL, t.archived_at, t.seq`, q.team, opts.Archived, opts.Worker, statuses)
	var out []protocol.Task
	var r taskRow
	var isBlocked bool
	_, err := pgx.ForEachRow(rows, r.dest(&isBlocked), func() error {
		t, err := r.task()
		if err != nil {
			return err
		}
		t.Blocked = isBlocked
		out = append(out, *t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Show returns one task, live or archived.
func (q *tasks) Show(id string) (*protocol.Task, error) {
	ctx, cancel := opContext()
	defer cancel()
	t, _, err := q.read(ctx, q.s.pool, id)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, queue.NotFound(id)
	}
	return t, nil
}

// Archive moves finished tasks whose last change is at least olderThan
// ago out of the live queue. It returns how many moved.
func (q *tasks) Archive(olderThan time.Duration) (int, error) {
	n := 0
	err := q.mutate(func(ctx context.Context, tx *txn, c *change) error {
		if err := lockTeamDeps(ctx, tx, q.team); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, `WITH moved AS (
				UPDATE tasks t SET archived_at = now()
				WHERE t.team = $1 AND t.archived_at IS NULL AND t.status IN ('done', 'failed', 'cancelled')
				  AND t.updated_at <= now() - $2 * interval '1 microsecond'
				RETURNING t.seq, t.id, t.status, t.worker, t.token)
			SELECT seq, now(), id, status, worker, token FROM moved ORDER BY seq`, q.team, olderThan.Microseconds())
		evs, err := goneEvents(rows, "archive")
		if err != nil {
			return err
		}
		n = len(evs)
		if n == 0 {
			return nil
		}
		c.events = append(c.events, evs...)
		return forgetPruned(ctx, tx, q.team)
	})
	return n, err
}

// Prune deletes finished tasks whose last change is at least olderThan
// ago, live or archived. Live tasks that depend on a pruned task keep its
// final status (in pruned). It returns how many went.
func (q *tasks) Prune(olderThan time.Duration) (int, error) {
	n := 0
	err := q.mutate(func(ctx context.Context, tx *txn, c *change) error {
		if err := lockTeamDeps(ctx, tx, q.team); err != nil {
			return err
		}
		// Archived ones first, as the file store reports them.
		rows, _ := tx.Query(ctx, `WITH gone AS (
				DELETE FROM tasks t WHERE t.team = $1 AND t.status IN ('done', 'failed', 'cancelled')
				  AND t.updated_at <= now() - $2 * interval '1 microsecond'
				RETURNING t.seq, t.id, t.status, t.worker, t.token, t.archived_at)
			SELECT seq, now(), id, status, worker, token FROM gone
			ORDER BY archived_at IS NULL, archived_at, seq`, q.team, olderThan.Microseconds())
		evs, err := goneEvents(rows, "prune")
		if err != nil {
			return err
		}
		n = len(evs)
		if n == 0 {
			return nil
		}
		c.events = append(c.events, evs...)
		ids, sts := make([]string, n), make([]string, n)
		for i, ev := range evs {
			ids[i], sts[i] = ev.Task, ev.Status
		}
		_, err = tx.Exec(ctx, `INSERT INTO pruned (team, id, status)
			SELECT $1, g.id, g.status FROM unnest($2::text[], $3::text[]) AS g(id, status)
			WHERE g.id IN (SELECT unnest(t.depends_on) FROM tasks t WHERE t.team = $1 AND t.archived_at IS NULL)
			ON CONFLICT (team, id) DO UPDATE SET status = excluded.status`, q.team, ids, sts)
		if err != nil {
			return err
		}
		return forgetPruned(ctx, tx, q.team)
	})
	return n, err
}

// goneEvents reads (seq, now, id, status, worker, token) rows of archived
// or pruned tasks as their events, in the rows' order.
func goneEvents(rows pgx.Rows, op string) ([]protocol.TaskEvent, error) {
	var out []protocol.TaskEvent
	var seq int64
	var now time.Time
	var id, status string
	var worker *string
	var token *int64
	_, err := pgx.ForEachRow(rows, []any{&seq, &now, &id, &status, &worker, &token}, func() error {
		ev := protocol.TaskEvent{Type: protocol.JournalTask, TS: now.UTC(), Op: op, Task: id, Status: status}
		if worker != nil {
			ev.Worker = *worker
		}
		if token != nil {
			ev.Token = *token
		}
		out = append(out, ev)
		return nil
	})
	return out, err
}

// forgetPruned drops the statuses of pruned tasks no live task depends on
// any more.
func forgetPruned(ctx context.Context, tx *txn, team string) error {
	_, err := tx.Exec(ctx, `DELETE FROM pruned p WHERE p.team = $1
		AND p.id NOT IN (SELECT unnest(t.depends_on) FROM tasks t WHERE t.team = $1 AND t.archived_at IS NULL)`, team)
	return err
}
