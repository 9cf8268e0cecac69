package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// TestWaitClaimSleepsThroughRenewals: a waiting claim is woken by a change
// that may have made a task claimable (here an add), not by the many that
// cannot (another worker's renewals, each notified): idle workers do not
// all try a claim at every change of the team.
func TestWaitClaimSleepsThroughRenewals(t *testing.T) {
	url := pgtest.DB(t)
	ctx := t.Context()
	var trips atomic.Int64
	waiter, err := pgstore.OpenCounting(ctx, url, &trips)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	busy, err := pgstore.OpenStore(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	wt, _ := waiter.Team("t")
	bt, _ := busy.Team("t")
	if _, err := bt.Tasks().Add([]protocol.Task{{ID: "x", Title: "x"}}); err != nil {
		t.Fatal(err)
	}
	x, err := bt.Tasks().Claim("busy", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{}, 1)
	pgstore.OnWait(waiter, func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	got := make(chan string, 1)
	go func() {
		tk, err := wt.Tasks().WaitClaim(context.Background(), "idle", time.Minute, 20*time.Second)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- tk.ID
	}()
	<-waiting // the waiter listens, has looked once more, and blocks
	before := trips.Load()
	start := time.Now()
	for range 40 {
		if _, err := bt.Tasks().Renew("x", x.Claim.Token, time.Minute); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // each renewal its own notification
	}
	time.Sleep(100 * time.Millisecond)
	attempts := trips.Load() - before
	// One attempt a second is the waiter's own rhythm.
	if allowed := 1 + int64(time.Since(start)/time.Second); attempts > allowed {
		t.Fatalf("the waiting claim made %d round trips during 40 renewals of another worker's task (at most %d expected)", attempts, allowed)
	}
	if _, err := bt.Tasks().Add([]protocol.Task{{ID: "y", Title: "y"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-got:
		if id != "y" {
			t.Fatalf("the waiting claim got %s, want y", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting claim did not wake for the new task")
	}
}

// TestWaitClaimsShareOneListener: the waiting claims of one store (the
// host's store agent) share one LISTEN connection per team, and a new task
// wakes them all the same.
func TestWaitClaimsShareOneListener(t *testing.T) {
	url := pgtest.DB(t)
	ctx := t.Context()
	s, err := pgstore.OpenStore(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 8
	waiting := make(chan struct{}, n)
	pgstore.OnWait(s, func() {
		select {
		case waiting <- struct{}{}: // each waiter's first wait; later ones need no room
		default:
		}
	})
	tm, _ := s.Team("t")
	got := make(chan string, n)
	for i := range n {
		go func() {
			tk, err := tm.Tasks().WaitClaim(ctx, fmt.Sprint("w", i), time.Minute, 30*time.Second)
			if err != nil {
				got <- "error: " + err.Error()
				return
			}
			got <- tk.ID
		}()
	}
	for range n {
		<-waiting
	}
	var listens int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&listens); err != nil {
		t.Fatal(err)
	}
	if listens != 1 {
		t.Fatalf("%d waiting claims hold %d LISTEN connections, want 1", n, listens)
	}
	in := make([]protocol.Task, n)
	for i := range in {
		in[i] = protocol.Task{ID: fmt.Sprint("k", i), Title: "k"}
	}
	if _, err := tm.Tasks().Add(in); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range n {
		select {
		case id := <-got:
			if seen[id] || !strings.HasPrefix(id, "k") {
				t.Fatalf("a waiting claim got %q (seen %v)", id, seen)
			}
			seen[id] = true
		case <-time.After(15 * time.Second):
			t.Fatalf("only %d of %d waiting claims woke for the new tasks", len(seen), n)
		}
	}
}
