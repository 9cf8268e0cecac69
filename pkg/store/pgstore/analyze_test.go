package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// TestLargeAddRefreshesStatistics: one Add of many tasks leaves the
// planner statistics of the new rows, so that the next fresh connection (a
// new pg-queue process) completes a held task by an index that leads to
// it. Without them, after an Add of 100,000 tasks, the planner read every
// live task for each complete: 330 ms instead of 1 ms, until autovacuum
// came by (bench-store.sh found it).
func TestLargeAddRefreshesStatistics(t *testing.T) {
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
	in := make([]protocol.Task, 1000)
	for i := range in {
		in[i] = protocol.Task{ID: fmt.Sprintf("t%05d", i), Title: "task", Prompt: "do it"}
	}
	if _, err := tm.Tasks().Add(in); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tuples float64
	if err := conn.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = 'tasks'::regclass").Scan(&tuples); err != nil {
		t.Fatal(err)
	}
	if tuples < 1000 {
		t.Errorf("after adding 1,000 tasks the planner counts %v rows in tasks (-1: never analyzed)", tuples)
	}
}
