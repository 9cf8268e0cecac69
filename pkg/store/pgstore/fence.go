package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/secrets"
)

// The changes a claim's holder makes. Each checks the fencing token in
// the WHERE clause of the statement that changes the row: a stale token
// matches no row and changes nothing, and only then is the row read, to
// say why (queue.LeaseLost, queue.NotFound).

// held is the condition that the claim of task $2 holds token $3.
const held = `t.team = $1 AND t.id = $2 AND t.archived_at IS NULL AND t.status = 'claimed' AND t.token = $3`

// fenced runs sql, which changes the row of a held task and returns now()
// and taskCols (after the first of more), and returns the task; when no row
// matched, the error why, and the task as it is (nil when there is none).
func (q *tasks) fenced(ctx context.Context, tx *txn, id string, token int64, sql string, args []any, more ...any) (time.Time, *protocol.Task, error) {
	var r taskRow
	var now time.Time
	err := tx.QueryRow(ctx, sql, append([]any{q.team, id, token}, args...)...).Scan(append(append(more, &now), r.dest()...)...)
	if err == nil {
		t, err := r.task()
		return now, t, err
	}
	if !isNoRows(err) {
		return now, nil, err
	}
	t, archived, err := q.read(ctx, tx, id)
	if err != nil {
		return now, t, err
	}
	if t == nil || archived {
		return now, t, queue.NotFound(id)
	}
	return now, t, queue.LeaseLost(t, token)
}

// read returns a task, live or archived; nil when there is none.
func (q *tasks) read(ctx context.Context, db querier, id string) (*protocol.Task, bool, error) {
	var r taskRow
	var archived, isBlocked bool
	err := db.QueryRow(ctx, `SELECT `+taskCols+`, t.archived_at IS NOT NULL, `+blocked+`
		FROM tasks t WHERE t.team = $1 AND t.id = $2`, q.team, id).Scan(r.dest(&archived, &isBlocked)...)
	if isNoRows(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	t, err := r.task()
	if t != nil {
		t.Blocked = isBlocked
	}
	return t, archived, err
}

// oneShot runs sql, a change of a held task with its journal append in
// one statement that returns now() and taskCols of the changed row, and
// returns the task; when no row matched, the error why and the task as it
// is (nil when there is none), as fenced.
func (q *tasks) oneShot(id string, token int64, op, sql string, args ...any) (*protocol.Task, error) {
	ctx, cancel := opContext()
	defer cancel()
	var r taskRow
	var now time.Time
	err := q.s.changeRow(ctx, q.team, frees(op), sql, append([]any{q.team, id, token}, args...), append([]any{&now}, r.dest()...)...)
	if err == nil {
		return r.task()
	}
	if !isNoRows(err) {
		return nil, err
	}
	t, archived, err := q.read(ctx, q.s.pool, id)
	if err != nil {
		return t, err
	}
	if t == nil || archived {
		return t, queue.NotFound(id)
	}
	return t, queue.LeaseLost(t, token)
}

// fencedEvent is the end of a one-statement change whose CTE ch returns
// taskCols: its event (op, with the row's claim) and the row.
func fencedEvent(op, status string) string {
	return `,
	events AS (SELECT 0 AS ord, '` + op + `' AS op, ` + taskEvent(op, "c.id", "c.worker", "c.token", status, "") + ` AS rec FROM ch c)` +
		appendEvents + `
	SELECT now(), ` + colsOf("c") + changedFlag + ` FROM ch c`
}

var (
	renewSQL = `WITH ch AS (
		UPDATE tasks t SET lease_until = now() + $4 * interval '1 microsecond', updated_at = now()
		WHERE ` + held + ` RETURNING ` + taskCols + `)` + fencedEvent("renew", "claimed")
	completeSQL = `WITH ch AS (
		UPDATE tasks t SET status = 'done', updated_at = now(), error = NULL, result = $4::json
		WHERE ` + held + ` RETURNING ` + taskCols + `)` + fencedEvent("complete", "done")
)

// Renew extends the lease of a held task to now+lease.
func (q *tasks) Renew(id string, token int64, lease time.Duration) (*protocol.Task, error) {
	lease, err := queue.CheckLease(lease)
	if err != nil {
		return nil, err
	}
	t, err := q.oneShot(id, token, "renew", renewSQL, lease.Microseconds())
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Complete marks a held task done with its result. Completing again with
// the same token is a harmless success that changes nothing.
func (q *tasks) Complete(id string, token int64, result json.RawMessage) (*protocol.Task, error) {
	if err := queue.CheckResult(result); err != nil {
		return nil, err
	}
	var res *string
	if r := queue.CompactResult(result); r != nil {
		s := string(secrets.Redact(r))
		res = &s
	}
	t, err := q.oneShot(id, token, "complete", completeSQL, res)
	if errors.Is(err, queue.ErrNotFound) && t != nil { // finished and archived since
		err = queue.LeaseLost(t, token)
	}
	if err != nil {
		if t != nil && t.Status == protocol.StatusDone && t.Claim != nil && t.Claim.Token == token {
			t.Blocked = false
			return t, nil
		}
		return nil, err
	}
	return t, nil
}

// Fail records msg as the task's error. With retry, the task goes back to
// pending when it has attempts left; otherwise it fails.
func (q *tasks) Fail(id string, token int64, msg string, retry bool) (*protocol.Task, error) {
	var out *protocol.Task
	err := q.mutate(func(ctx context.Context, tx *txn, c *change) error {
		var worker string
		now, t, err := q.fenced(ctx, tx, id, token, `WITH o AS (
				SELECT t.team, t.id, t.worker, ($5::bool AND t.attempts < t.max_attempts) AS again
				FROM tasks t WHERE `+held+` FOR UPDATE)
			UPDATE tasks t SET error = $4, updated_at = now(),
				status = CASE WHEN o.again THEN 'pending' ELSE 'failed' END,
				worker = CASE WHEN o.again THEN NULL ELSE t.worker END,
				token = CASE WHEN o.again THEN NULL ELSE t.token END,
				lease_until = CASE WHEN o.again THEN NULL ELSE t.lease_until END
			FROM o WHERE t.team = o.team AND t.id = o.id
			RETURNING o.worker, now(), `+taskCols, []any{secrets.RedactString(msg), retry}, &worker)
		if err != nil {
			return err
		}
		ev := c.event(now, "fail", t, msg)
		ev.Worker, ev.Token = worker, token
		out = t
		return nil
	})
	return out, err
}

// Release hands a held task back: it is pending again, and the attempt it
// used still counts.
func (q *tasks) Release(id string, token int64) (*protocol.Task, error) {
	return q.release(id, token, false, "")
}

// Unclaim takes back a claim that never reached its worker: pending
// again, with the attempt given back.
func (q *tasks) Unclaim(id string, token int64, reason string) (*protocol.Task, error) {
	return q.release(id, token, true, reason)
}

func (q *tasks) release(id string, token int64, refund bool, reason string) (*protocol.Task, error) {
	var out *protocol.Task
	err := q.mutate(func(ctx context.Context, tx *txn, c *change) error {
		var worker string
		now, t, err := q.fenced(ctx, tx, id, token, `WITH o AS (
				SELECT t.team, t.id, t.worker FROM tasks t WHERE `+held+` FOR UPDATE)
			UPDATE tasks t SET status = 'pending', worker = NULL, token = NULL, lease_until = NULL, updated_at = now(),
				attempts = CASE WHEN $4::bool AND t.attempts > 0 THEN t.attempts - 1 ELSE t.attempts END
			FROM o WHERE t.team = o.team AND t.id = o.id
			RETURNING o.worker, now(), `+taskCols, []any{refund}, &worker)
		if err != nil {
			return err
		}
		ev := c.event(now, "release", t, reason)
		ev.Worker, ev.Token = worker, token
		out = t
		return nil
	})
	return out, err
}

// ReleaseWorker releases the tasks claimed by worker; with before > 0,
// only claims whose token is below it.
func (q *tasks) ReleaseWorker(worker, reason string, before int64) ([]protocol.Task, error) {
	var out []protocol.Task
	err := q.mutate(func(ctx context.Context, tx *txn, c *change) error {
		out = nil
		rows, _ := tx.Query(ctx, `WITH o AS (
				SELECT t.team, t.id, t.token FROM tasks t
				WHERE t.team = $1 AND t.archived_at IS NULL AND t.status = 'claimed' AND t.worker = $2
				  AND ($3::bigint <= 0 OR t.token < $3)
				FOR UPDATE)
			UPDATE tasks t SET status = 'pending', worker = NULL, token = NULL, lease_until = NULL, updated_at = now()
			FROM o WHERE t.team = o.team AND t.id = o.id
			RETURNING t.seq, o.token, now(), `+taskCols, q.team, worker, before)
		type released struct {
			seq, token int64
			now        time.Time
			t          *protocol.Task
		}
		var rs []released
		var x released
		var r taskRow
		_, err := pgx.ForEachRow(rows, append([]any{&x.seq, &x.token, &x.now}, r.dest()...), func() error {
			t, err := r.task()
			x.t = t
			rs = append(rs, x)
			return err
		})
		if err != nil {
			return err
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i].seq < rs[j].seq }) // queue order
		for _, x := range rs {
			ev := c.event(x.now, "release", x.t, reason)
			ev.Worker, ev.Token = worker, x.token
			out = append(out, *x.t)
		}
		return nil
	})
	return out, err
}

// Cancel cancels a pending or claimed task (see CancelAll).
func (q *tasks) Cancel(id, reason string) (*protocol.Task, error) {
	ts, err := q.CancelAll([]string{id}, reason)
	if err != nil {
		return nil, err
	}
	return &ts[0], nil
}

// CancelAll cancels several tasks, all or none: an unknown id or a done or
// failed task changes nothing. Cancelling a cancelled task is a harmless
// success. It returns the tasks in the order of ids.
func (q *tasks) CancelAll(ids []string, reason string) ([]protocol.Task, error) {
	var out []protocol.Task
	err := q.mutate(func(ctx context.Context, tx *txn, c *change) error {
		out = nil
		rows, _ := tx.Query(ctx, `SELECT `+taskCols+`, t.archived_at IS NOT NULL FROM tasks t
			WHERE t.team = $1 AND t.id = ANY($2) ORDER BY t.seq FOR UPDATE`, q.team, ids)
		type found struct {
			t        *protocol.Task
			archived bool
		}
		have := map[string]found{}
		var r taskRow
		var archived bool
		_, err := pgx.ForEachRow(rows, r.dest(&archived), func() error {
			t, err := r.task()
			have[r.id] = found{t, archived}
			return err
		})
		if err != nil {
			return err
		}
		var cancel []string
		seen := map[string]bool{}
		for _, id := range ids {
			f, ok := have[id]
			switch {
			case !ok:
				return queue.NotFound(id)
			case f.archived:
				return fmt.Errorf("task %s: %w: it is %s (archived)", id, queue.ErrFinished, f.t.Status)
			case f.t.Status == protocol.StatusDone || f.t.Status == protocol.StatusFailed:
				return fmt.Errorf("task %s: %w: it is %s", id, queue.ErrFinished, f.t.Status)
			case f.t.Status != protocol.StatusCancelled && !seen[id]:
				seen[id] = true
				cancel = append(cancel, id)
			}
		}
		done := map[string]*protocol.Task{}
		if len(cancel) > 0 {
			var errMsg *string
			if reason != "" {
				r := secrets.RedactString(reason)
				errMsg = &r
			}
			rows, _ := tx.Query(ctx, `UPDATE tasks t SET status = 'cancelled', updated_at = now(), error = coalesce($3, t.error)
				WHERE t.team = $1 AND t.id = ANY($2) RETURNING now(), `+taskCols, q.team, cancel, errMsg)
			var now time.Time
			_, err := pgx.ForEachRow(rows, append([]any{&now}, r.dest()...), func() error {
				t, err := r.task()
				done[r.id] = t
				return err
			})
			if err != nil {
				return err
			}
			for _, id := range cancel {
				c.event(now, "cancel", done[id], reason)
			}
		}
		for _, id := range ids {
			if t := done[id]; t != nil {
				out = append(out, *t)
			} else {
				out = append(out, *have[id].t)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
