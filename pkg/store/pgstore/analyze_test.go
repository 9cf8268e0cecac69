package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// TestLargeAddKeepsCompleteCheap: after one Add of many tasks, a fresh
// connection (a new pg-queue process) completes a held task by an index
// that leads to it, not by reading every live task because the planner has
// no statistics of the new rows yet. (At 100,000 tasks, the issue's
// largest queue, the planner without statistics chose an index of every
// live task: 330 ms a complete, against 1 ms.)
func TestLargeAddKeepsCompleteCheap(t *testing.T) {
	t.Parallel()
	u := pgtest.DB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := pgstore.OpenStore(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tm, _ := s.Team("big")
	in := make([]protocol.Task, 100000)
	for i := range in {
		in[i] = protocol.Task{ID: fmt.Sprintf("t%05d", i), Title: "task", Prompt: "do it"}
	}
	if _, err := tm.Tasks().Add(in); err != nil {
		t.Fatal(err)
	}
	var k *protocol.Task
	for range 3 {
		if k, err = tm.Tasks().Claim("w1", time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := tm.Tasks().Complete(k.ID, k.Claim.Token, nil); err != nil {
			t.Fatal(err)
		}
	}
	if k, err = tm.Tasks().Claim("w1", time.Minute); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The statement of Complete, measured and rolled back.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) UPDATE tasks t SET status = 'done'
		WHERE t.team = $1 AND t.id = $2 AND t.archived_at IS NULL AND t.status = 'claimed' AND t.token = $3`,
		"big", k.ID, k.Claim.Token)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range plan {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(l), "Rows Removed by Filter: %d", &n); err == nil && n > 100 {
			t.Errorf("completing a held task after a large add reads %d other tasks:\n%s", n, strings.Join(plan, "\n"))
		}
	}
}
