package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// tasks is one team's queue: the semantics of *queue.Queue in SQL.
type tasks struct {
	s    *Store
	team string
}

var _ store.Tasks = (*tasks)(nil)

// taskCols are the columns taskRow scans, for a table aliased t.
const taskCols = `t.id, t.status, t.priority, t.depends_on, t.attempts, t.max_attempts,
	t.worker, t.token, t.lease_until, t.result, t.error, t.created_at, t.updated_at, t.spec`

// claimable is the condition under which a claim may take row t: pending
// with every dependency done, or claimed under an expired lease. (The
// first line lets the planner use tasks_claimable.)
const claimable = `t.team = $1 AND t.archived_at IS NULL AND t.status IN ('pending', 'claimed')
	AND ((t.status = 'pending' AND (cardinality(t.depends_on) = 0 OR deps_done(t.team, t.depends_on)))
	  OR (t.status = 'claimed' AND t.lease_until <= now()))`

// blocked is the Blocked flag of row t in listings.
const blocked = `(t.status = 'pending' AND t.archived_at IS NULL AND cardinality(t.depends_on) > 0
	AND NOT deps_done(t.team, t.depends_on))`

// taskRow is a row of tasks as taskCols scans it.
type taskRow struct {
	id, status       string
	priority         int
	deps             []string
	attempts, max    int
	worker           *string
	token            *int64
	until            *time.Time
	result           []byte
	errMsg           *string
	created, updated time.Time
	spec             []byte
}

func (r *taskRow) dest(more ...any) []any {
	return append([]any{&r.id, &r.status, &r.priority, &r.deps, &r.attempts, &r.max,
		&r.worker, &r.token, &r.until, &r.result, &r.errMsg, &r.created, &r.updated, &r.spec}, more...)
}

// task is the protocol.Task of the row: the spec as added, with the state
// the columns hold.
func (r *taskRow) task() (*protocol.Task, error) {
	var t protocol.Task
	if err := queue.DecodeTask(r.spec, &t); err != nil {
		return nil, fmt.Errorf("task %s: stored spec: %w", r.id, err)
	}
	t.ID, t.Status, t.Priority = r.id, r.status, r.priority
	t.DependsOn = r.deps
	if t.DependsOn == nil {
		t.DependsOn = []string{}
	}
	t.Attempts, t.MaxAttempts = r.attempts, r.max
	t.Claim = nil
	if r.worker != nil && r.token != nil && r.until != nil {
		t.Claim = &protocol.Claim{Worker: *r.worker, Token: *r.token, Until: r.until.UTC()}
	}
	t.Result = nil
	if r.result != nil {
		t.Result = json.RawMessage(r.result)
	}
	t.Error = r.errMsg
	t.CreatedAt, t.UpdatedAt = r.created.UTC(), r.updated.UTC()
	return &t, nil
}

// change collects the journal events of one transaction.
type change struct {
	events []protocol.TaskEvent
}

func (c *change) event(now time.Time, op string, t *protocol.Task, reason string) *protocol.TaskEvent {
	ev := protocol.TaskEvent{Type: protocol.JournalTask, TS: now.UTC(), Op: op, Task: t.ID, Status: t.Status, Reason: reason}
	if t.Claim != nil {
		ev.Worker, ev.Token = t.Claim.Worker, t.Claim.Token
	}
	c.events = append(c.events, ev)
	return &c.events[len(c.events)-1]
}

// mutate runs fn in a transaction that also appends fn's events to the
// journal; an error from fn changes nothing.
func (q *tasks) mutate(fn func(ctx context.Context, tx *txn, c *change) error) error {
	ctx, cancel := opContext()
	defer cancel()
	tx, err := q.s.beginTxn(ctx)
	if err != nil {
		return err
	}
	defer tx.end()
	var c change
	if err := fn(ctx, tx, &c); err != nil {
		return err
	}
	recs := make([]record, len(c.events))
	for i := range c.events {
		b, err := json.Marshal(&c.events[i])
		if err != nil {
			return err
		}
		recs[i] = record{data: secrets.Redact(b), op: c.events[i].Op}
	}
	return tx.commit(ctx, q.team, recs)
}

// Add appends tasks, all or none (see queue.Queue.Add).
func (q *tasks) Add(in []protocol.Task) ([]protocol.Task, error) {
	if len(in) == 0 {
		return nil, nil
	}
	ts := make([]protocol.Task, len(in))
	for i := range in {
		t, err := queue.Prepare(i, in[i])
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	err := q.mutate(func(ctx context.Context, tx *txn, c *change) error {
		return q.add(ctx, tx, ts, c)
	})
	if err != nil {
		return nil, err
	}
	return ts, nil
}

func (q *tasks) add(ctx context.Context, tx *txn, in []protocol.Task, c *change) error {
	// What the database knows of the given ids and the dependencies.
	var look []string
	for i := range in {
		if in[i].ID != "" {
			look = append(look, in[i].ID)
		}
		look = append(look, in[i].DependsOn...)
	}
	b := &pgx.Batch{}
	b.Queue("SELECT now()")
	b.Queue("SELECT id, status, archived_at IS NOT NULL FROM tasks WHERE team = $1 AND id = ANY($2)", q.team, look)
	b.Queue("SELECT id, status FROM pruned WHERE team = $1 AND id = ANY($2)", q.team, look)
	br := tx.SendBatch(ctx, b)
	var now time.Time
	if err := br.QueryRow().Scan(&now); err != nil {
		br.Close()
		return err
	}
	live, archived, pruned := map[string]bool{}, map[string]string{}, map[string]string{}
	rows, _ := br.Query()
	var id, st string
	var arch bool
	_, err := pgx.ForEachRow(rows, []any{&id, &st, &arch}, func() error {
		if arch {
			archived[id] = st
		} else {
			live[id] = true
		}
		return nil
	})
	if err != nil {
		br.Close()
		return err
	}
	rows, _ = br.Query()
	_, err = pgx.ForEachRow(rows, []any{&id, &st}, func() error { pruned[id] = st; return nil })
	if err := errors.Join(err, br.Close()); err != nil {
		return err
	}

	// The checks of queue.Queue.Add, in its order.
	inputErr := func(i int, format string, args ...any) error {
		return &queue.InputError{Index: i, Msg: fmt.Sprintf(format, args...)}
	}
	batch := make(map[string]int, len(in))
	given := map[string]bool{}
	for i := range in {
		if in[i].ID == "" {
			in[i].ID = newID()
		} else {
			given[in[i].ID] = true
		}
		if j, dup := batch[in[i].ID]; dup {
			return inputErr(i, "task %s appears twice in the input (also task %d)", in[i].ID, j+1)
		}
		if live[in[i].ID] {
			return inputErr(i, "task %s already exists", in[i].ID)
		}
		batch[in[i].ID] = i
	}
	for i := range in {
		if _, ok := archived[in[i].ID]; ok && given[in[i].ID] {
			return inputErr(i, "task %s already exists (archived)", in[i].ID)
		}
		if st, ok := pruned[in[i].ID]; ok && given[in[i].ID] {
			return inputErr(i, "task %s already exists (%s, then pruned; live tasks depend on it)", in[i].ID, st)
		}
		for _, d := range in[i].DependsOn {
			_, inBatch := batch[d]
			_, arch := archived[d]
			_, gone := pruned[d]
			if !inBatch && !live[d] && !arch && !gone {
				return inputErr(i, "task %s depends on unknown task %s", in[i].ID, d)
			}
		}
	}
	if err := queue.FindCycle(in, batch); err != nil {
		return err
	}

	now = now.UTC()
	rowsIn := make([][]any, len(in))
	for i := range in {
		t := &in[i]
		t.Status = protocol.StatusPending
		t.CreatedAt, t.UpdatedAt = now, now
		spec, err := queue.EncodeTask(t)
		if err != nil {
			return fmt.Errorf("encode task %s: %w", t.ID, err)
		}
		rowsIn[i] = []any{q.team, t.ID, t.Status, t.Priority, t.DependsOn, 0, t.MaxAttempts, now, now, string(secrets.Redact(spec))}
		c.event(now, "add", t, "")
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"tasks"},
		[]string{"team", "id", "status", "priority", "depends_on", "attempts", "max_attempts", "created_at", "updated_at", "spec"},
		pgx.CopyFromRows(rowsIn))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // added by another process meanwhile
		return &queue.InputError{Index: -1, Msg: "task already exists: " + pgErr.Detail}
	}
	return err
}

// spentSQL finds claimable tasks out of attempts: they fail on the way.
const spentSQL = `SELECT now(), ` + taskCols + ` FROM tasks t
	WHERE ` + claimable + ` AND t.attempts >= t.max_attempts
	ORDER BY t.seq
	FOR UPDATE SKIP LOCKED`

// claimSQL claims the best claimable task no other claim holds: highest
// priority, then oldest. It returns the row's claim before and after.
const claimSQL = `WITH c AS (
		SELECT t.team, t.id, t.status AS old_status, t.worker AS old_worker, t.token AS old_token, t.lease_until AS old_until
		FROM tasks t
		WHERE ` + claimable + ` AND t.attempts < t.max_attempts
		ORDER BY t.priority DESC, t.seq
		LIMIT 1
		FOR UPDATE SKIP LOCKED)
	UPDATE tasks t SET status = 'claimed', attempts = t.attempts + 1, worker = $2,
		token = nextval('task_token'), lease_until = now() + $3 * interval '1 microsecond', updated_at = now()
	FROM c WHERE t.team = c.team AND t.id = c.id
	RETURNING c.old_status, c.old_worker, c.old_token, c.old_until, now(), ` + taskCols

// Claim leases the best claimable task to worker (see queue.Queue.Claim).
func (q *tasks) Claim(worker string, lease time.Duration) (*protocol.Task, error) {
	if err := teamdir.ValidName("worker", worker); err != nil {
		return nil, &queue.InputError{Index: -1, Msg: err.Error()}
	}
	lease, err := queue.CheckLease(lease)
	if err != nil {
		return nil, err
	}
	var out *protocol.Task
	err = q.mutate(func(ctx context.Context, tx *txn, c *change) error {
		out = nil
		b := &pgx.Batch{}
		b.Queue(spentSQL, q.team)
		b.Queue(claimSQL, q.team, worker, lease.Microseconds())
		br := tx.SendBatch(ctx, b)
		var spent []*protocol.Task
		rows, _ := br.Query()
		var r taskRow
		var now time.Time
		_, err := pgx.ForEachRow(rows, append([]any{&now}, r.dest()...), func() error {
			t, err := r.task()
			spent = append(spent, t)
			return err
		})
		if err != nil {
			br.Close()
			return err
		}
		var oldStatus string
		var oldWorker *string
		var oldToken *int64
		var oldUntil *time.Time
		err = br.QueryRow().Scan(append([]any{&oldStatus, &oldWorker, &oldToken, &oldUntil, &now}, r.dest()...)...)
		got := err == nil
		if err != nil && !isNoRows(err) {
			br.Close()
			return err
		}
		if err := br.Close(); err != nil {
			return err
		}
		if len(spent) > 0 {
			if err := q.exhaust(ctx, tx, now, spent, c); err != nil {
				return err
			}
		}
		if !got {
			return nil
		}
		t, err := r.task()
		if err != nil {
			return err
		}
		if oldStatus == protocol.StatusClaimed && oldWorker != nil && oldUntil != nil {
			ev := c.event(now, "expire", &protocol.Task{ID: t.ID, Status: protocol.StatusPending}, "lease expired at "+oldUntil.UTC().Format(time.RFC3339))
			ev.Worker = *oldWorker
			if oldToken != nil {
				ev.Token = *oldToken
			}
		}
		c.event(now, "claim", t, "")
		out = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, queue.ErrNothing
	}
	return out, nil
}

// exhaust fails tasks that used all their attempts (ts as they were).
func (q *tasks) exhaust(ctx context.Context, tx *txn, now time.Time, ts []*protocol.Task, c *change) error {
	ids, msgs := make([]string, len(ts)), make([]string, len(ts))
	for i, t := range ts {
		ids[i], msgs[i] = t.ID, queue.ExhaustMessage(t)
	}
	_, err := tx.Exec(ctx, `UPDATE tasks t SET status = 'failed', error = u.msg, updated_at = now()
		FROM unnest($2::text[], $3::text[]) AS u(id, msg) WHERE t.team = $1 AND t.id = u.id`, q.team, ids, msgs)
	if err != nil {
		return err
	}
	for i, t := range ts {
		t.Status, t.Error, t.UpdatedAt = protocol.StatusFailed, &msgs[i], now.UTC()
		c.event(now, "expire", t, msgs[i])
	}
	return nil
}
