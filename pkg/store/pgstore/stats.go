package pgstore

import (
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// Stats counts the tasks as queue.Queue.Stats does; done, failed and
// cancelled include the archived ones.
func (q *tasks) Stats() (*protocol.QueueStats, error) {
	ctx, cancel := opContext()
	defer cancel()
	st := &protocol.QueueStats{Type: "stats"}
	b := &pgx.Batch{}
	// One snapshot for every count: under READ COMMITTED each statement
	// would see its own, and a task added between two of them could make
	// the queue look drained (stuck = pending) while a task is free.
	b.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	b.Queue(`SELECT now(),
			count(*) FILTER (WHERE archived_at IS NULL),
			count(*) FILTER (WHERE archived_at IS NOT NULL),
			count(*) FILTER (WHERE archived_at IS NULL AND status = 'pending'),
			count(*) FILTER (WHERE archived_at IS NULL AND status = 'pending' AND cardinality(depends_on) = 0),
			count(*) FILTER (WHERE archived_at IS NULL AND status = 'claimed'),
			count(*) FILTER (WHERE archived_at IS NULL AND status = 'claimed' AND lease_until <= now()),
			count(*) FILTER (WHERE status = 'done'),
			count(*) FILTER (WHERE status = 'failed'),
			count(*) FILTER (WHERE status = 'cancelled')
		FROM tasks WHERE team = $1`, q.team)
	// The dependency graph of the unfinished tasks, and what their
	// dependencies are now.
	b.Queue(`SELECT id, status, depends_on FROM tasks
		WHERE team = $1 AND archived_at IS NULL AND status IN ('pending', 'claimed') AND cardinality(depends_on) > 0`, q.team)
	b.Queue(`WITH deps AS (SELECT DISTINCT unnest(depends_on) AS id FROM tasks
			WHERE team = $1 AND archived_at IS NULL AND status IN ('pending', 'claimed'))
		SELECT d.id, coalesce(t.status, p.status) FROM deps d
		LEFT JOIN tasks t ON t.team = $1 AND t.id = d.id
		LEFT JOIN pruned p ON p.team = $1 AND p.id = d.id
		WHERE t.status IS NOT NULL OR p.status IS NOT NULL`, q.team)
	b.Queue(`SELECT id, extract(epoch FROM now() - created_at)::float8 FROM tasks
		WHERE team = $1 AND archived_at IS NULL AND status = 'pending' ORDER BY created_at, seq LIMIT 1`, q.team)
	b.Queue(`SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM task_token`)
	b.Queue(`SELECT count(*) FILTER (WHERE ts > now() - interval '1 minute'),
			count(*) FILTER (WHERE ts > now() - interval '5 minutes'),
			count(*)
		FROM journal WHERE team = $1 AND op = 'complete' AND ts > now() - interval '15 minutes'
		  AND record->>'type' = 'task'`, q.team)
	b.Queue("COMMIT")
	br := q.s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, err
	}

	var now time.Time
	var free int
	if err := br.QueryRow().Scan(&now, &st.Live, &st.Archived, &st.Pending, &free, &st.Claimed, &st.Expired,
		&st.Done, &st.Failed, &st.Cancelled); err != nil {
		return nil, err
	}
	st.TS = now.UTC()
	type node struct {
		status string
		deps   []string
	}
	graph := map[string]node{}
	var id, status string
	var deps []string
	rows, _ := br.Query()
	if _, err := pgx.ForEachRow(rows, []any{&id, &status, &deps}, func() error {
		graph[id] = node{status, deps}
		return nil
	}); err != nil {
		return nil, err
	}
	statusOf := map[string]string{}
	rows, _ = br.Query()
	if _, err := pgx.ForEachRow(rows, []any{&id, &status}, func() error {
		statusOf[id] = status
		return nil
	}); err != nil {
		return nil, err
	}
	var age float64
	err := br.QueryRow().Scan(&st.OldestPending, &age)
	if err != nil && !isNoRows(err) {
		return nil, err
	}
	st.OldestPendingAge = age
	if err := br.QueryRow().Scan(&st.NextToken); err != nil {
		return nil, err
	}
	tp := &st.Throughput
	if err := br.QueryRow().Scan(&tp.Last1m, &tp.Last5m, &tp.Last15m); err != nil {
		return nil, err
	}
	tp.PerMinute = float64(tp.Last5m) / 5

	// Blocked and stuck, as queue's stats: a dependency is dead when it
	// can never be done (failed, cancelled, unknown, or depending on a
	// dead task, or on a cycle).
	dead := map[string]bool{}
	var isDead func(id string, depth int) bool
	isDead = func(id string, depth int) bool {
		if d, ok := dead[id]; ok {
			return d
		}
		dead[id] = true // met again while visiting it: a cycle
		s, ok := statusOf[id]
		res := !ok || s == protocol.StatusFailed || s == protocol.StatusCancelled
		if ok && (s == protocol.StatusPending || s == protocol.StatusClaimed) && depth < 10000 {
			for _, d := range graph[id].deps {
				if isDead(d, depth+1) {
					res = true
					break
				}
			}
		}
		dead[id] = res
		return res
	}
	claimable := free
	for _, n := range graph {
		if n.status != protocol.StatusPending {
			continue
		}
		done := true
		for _, d := range n.deps {
			if statusOf[d] != protocol.StatusDone {
				done = false
				break
			}
		}
		if done {
			claimable++
			continue
		}
		st.Blocked++
		for _, d := range n.deps {
			if isDead(d, 0) {
				st.Stuck++
				break
			}
		}
	}
	st.Claimable = claimable + st.Expired
	st.Drained = st.Claimed == 0 && st.Pending == st.Stuck
	return st, nil
}
