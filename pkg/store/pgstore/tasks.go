package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	t.worker, t.token, t.lease_until, t.result, t.error, t.created_at, t.updated_at, t.spec, t.claim_id`

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
	claimID          *string
}

func (r *taskRow) dest(more ...any) []any {
	return append([]any{&r.id, &r.status, &r.priority, &r.deps, &r.attempts, &r.max,
		&r.worker, &r.token, &r.until, &r.result, &r.errMsg, &r.created, &r.updated, &r.spec, &r.claimID}, more...)
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
		if r.claimID != nil {
			t.Claim.ID = *r.claimID
		}
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

// lockDeps serializes, per team, what checks dependencies (Add) with what
// removes the tasks and pruned rows they name (Archive, Prune): without
// it an Add could find a dependency that a concurrent Prune deletes
// without recording it in pruned, and the new task would wait forever.
// Claims and other changes do not take it.
const lockDeps = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"

func depsKey(team string) string { return "powerglide/deps/" + team }

// lockTeamDeps takes lockDeps for team in tx (Add queues it in its batch).
func lockTeamDeps(ctx context.Context, tx *txn, team string) error {
	_, err := tx.Exec(ctx, lockDeps, depsKey(team))
	return err
}

// analyzeAfter is the size of an Add after which the tasks table is
// analyzed.
const analyzeAfter = 1000

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
	if len(ts) >= analyzeAfter {
		// Fresh statistics after a bulk load, or the planner may read
		// a changed task through an index of the whole queue until
		// autovacuum comes by (a claim+complete at 100k live tasks
		// took 140 ms instead of 2). Best effort: the tasks are added.
		ctx, cancel := opContext()
		defer cancel()
		q.s.pool.Exec(ctx, "ANALYZE tasks")
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
	b.Queue(lockDeps, depsKey(q.team))
	b.Queue("SELECT now()")
	b.Queue("SELECT id, status, archived_at IS NOT NULL FROM tasks WHERE team = $1 AND id = ANY($2)", q.team, look)
	b.Queue("SELECT id, status FROM pruned WHERE team = $1 AND id = ANY($2)", q.team, look)
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return err
	}
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

// colsOf is taskCols for a table or CTE aliased a.
func colsOf(a string) string { return strings.ReplaceAll(taskCols, "t.", a+".") }

// claimSQL is a claim, in one statement: it fails the claimable tasks out
// of attempts (as queue.ExhaustMessage words it), claims the best
// claimable task no other claim holds (highest priority, then oldest),
// and appends the events. A claim that finds nothing takes no lock.
var claimSQL = `WITH spent AS (
		SELECT t.team, t.id, t.status AS old_status, t.worker, t.token, t.lease_until, t.attempts, t.max_attempts, t.seq
		FROM tasks t WHERE ` + claimable + ` AND t.attempts >= t.max_attempts
		FOR UPDATE SKIP LOCKED),
	failed AS (
		UPDATE tasks t SET status = 'failed', updated_at = now(),
			error = CASE WHEN s.old_status = 'claimed'
				THEN format('lease of worker %s expired at %s after attempt %s of %s', s.worker, ` + secondsRFC3339("s.lease_until") + `, s.attempts, s.max_attempts)
				ELSE format('no attempts left: %s of %s used', s.attempts, s.max_attempts) END
		FROM spent s WHERE t.team = s.team AND t.id = s.id
		RETURNING s.seq, t.id, t.worker, t.token, t.error),
	pick AS (
		SELECT t.team, t.id, t.status AS old_status, t.worker AS old_worker, t.token AS old_token, t.lease_until AS old_until
		FROM tasks t WHERE ` + claimable + ` AND t.attempts < t.max_attempts
		ORDER BY t.priority DESC, t.seq
		LIMIT 1
		FOR UPDATE SKIP LOCKED),
	claimed AS (
		UPDATE tasks t SET status = 'claimed', attempts = t.attempts + 1, worker = $2,
			token = nextval('task_token'), lease_until = now() + $3 * interval '1 microsecond', updated_at = now(),
			claim_id = NULLIF($4::text, '')
		FROM pick p WHERE t.team = p.team AND t.id = p.id
		RETURNING p.old_status, p.old_worker, p.old_token, p.old_until, ` + taskCols + `),
	events AS (
		SELECT f.seq AS ord, 'expire' AS op, ` + taskEvent("expire", "f.id", "f.worker", "f.token", "failed", "to_json(f.error)") + ` AS rec
		FROM failed f
		UNION ALL
		SELECT 9223372036854775806, 'expire', ` + taskEvent("expire", "c.id", "c.old_worker", "c.old_token", "pending", "to_json('lease expired at ' || "+secondsRFC3339("c.old_until")+")") + `
		FROM claimed c WHERE c.old_status = 'claimed'
		UNION ALL
		SELECT 9223372036854775807, 'claim', ` + taskEvent("claim", "c.id", "c.worker", "c.token", "claimed", "") + `
		FROM claimed c)` + appendEvents + `
	SELECT now(), ` + colsOf("c") + changedFlag + ` FROM claimed c`

// Claim leases the best claimable task to worker (see queue.Queue.Claim),
// in one statement. (A claim that claims nothing but fails spent tasks
// wakes no one: followers see those events within a second.)
func (q *tasks) Claim(worker string, lease time.Duration) (*protocol.Task, error) {
	return q.claim(worker, lease, "")
}

// claim is Claim that records the claim id id (none when empty).
func (q *tasks) claim(worker string, lease time.Duration, id string) (*protocol.Task, error) {
	if err := teamdir.ValidName("worker", worker); err != nil {
		return nil, &queue.InputError{Index: -1, Msg: err.Error()}
	}
	if err := queue.CheckClaimID(id); err != nil {
		return nil, err
	}
	lease, err := queue.CheckLease(lease)
	if err != nil {
		return nil, err
	}
	ctx, cancel := opContext()
	defer cancel()
	var r taskRow
	var now time.Time
	err = q.s.changeRow(ctx, q.team, false, claimSQL, []any{q.team, worker, lease.Microseconds(), id}, append([]any{&now}, r.dest()...)...)
	if isNoRows(err) {
		return nil, queue.ErrNothing
	}
	if err != nil {
		return nil, err
	}
	return r.task()
}
