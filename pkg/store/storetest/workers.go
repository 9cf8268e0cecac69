package storetest

import (
	"errors"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// Worker records: read what was written, list in name order, updates of
// one worker take turns (none lost), velocity defaults to 1.
func testWorkers(t *testing.T, e *env) {
	ws := e.team.Workers()
	ctx := t.Context()
	if _, err := ws.Read(ctx, "1"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read a missing record: %v", err)
	}
	if _, err := ws.Read(ctx, "../x"); !badInput(err) {
		t.Fatalf("read a bad name: %v", err)
	}
	hb := time.Now().UTC().Truncate(time.Microsecond)
	for _, name := range []string{"10", "2", "b", "1"} {
		if err := ws.Write(ctx, &protocol.Worker{Worker: name, PID: 7, Host: "box1", State: "idle", HeartbeatAt: hb}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ws.Read(ctx, "2")
	if err != nil || got.Host != "box1" || got.PID != 7 || !got.HeartbeatAt.Equal(hb) {
		t.Fatalf("read: %v %+v", err, got)
	}
	list, errs := ws.List(ctx)
	var names []string
	for _, w := range list {
		names = append(names, w.Worker)
	}
	if len(errs) != 0 || len(names) != 4 || names[0] != "1" || names[1] != "2" || names[2] != "10" || names[3] != "b" {
		t.Fatalf("list %v %v", names, errs)
	}
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := ws.Update(ctx, "u", func(old *protocol.Worker) (*protocol.Worker, error) {
				if old == nil {
					old = &protocol.Worker{Worker: "u"}
				}
				old.Step++
				return old, nil
			})
			if err != nil {
				t.Errorf("update: %v", err)
			}
		})
	}
	wg.Wait()
	if got, err := ws.Read(ctx, "u"); err != nil || got.Step != n {
		t.Fatalf("after %d concurrent updates: %v %+v", n, err, got)
	}
	if _, err := ws.Update(ctx, "u", func(old *protocol.Worker) (*protocol.Worker, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Update(ctx, "u", func(old *protocol.Worker) (*protocol.Worker, error) {
		return &protocol.Worker{Worker: "v"}, nil
	}); !badInput(err) {
		t.Fatalf("a record written under another name: %v", err)
	}
	if v, err := ws.Velocity(ctx, "1"); err != nil || v != 1 {
		t.Fatalf("default velocity %v %v", v, err)
	}
	if err := ws.SetVelocity(ctx, "1", 0.5); err != nil {
		t.Fatal(err)
	}
	if err := ws.SetVelocity(ctx, "1", -1); !badInput(err) {
		t.Fatalf("negative velocity: %v", err)
	}
	if v, err := ws.Velocity(ctx, "1"); err != nil || v != 0.5 {
		t.Fatalf("velocity %v %v", v, err)
	}
	if err := ws.SetVelocity(ctx, "9", 0); err != nil {
		t.Fatal(err)
	}
	if v, err := ws.Velocity(ctx, "9"); err != nil || v != 0 {
		t.Fatalf("paused velocity %v %v", v, err)
	}
}

// The budget ledger: missing until written; updates take turns.
func testBudget(t *testing.T, e *env) {
	b := e.team.Budget()
	ctx := t.Context()
	if _, err := b.Read(ctx); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read a missing budget: %v", err)
	}
	if tb, err := b.Update(ctx, func(old *protocol.TeamBudget) (*protocol.TeamBudget, error) { return nil, nil }); err != nil || tb != nil {
		t.Fatalf("an update that writes nothing: %v %+v", err, tb)
	}
	if _, err := b.Read(ctx); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an update that wrote nothing made a budget: %v", err)
	}
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := b.Update(ctx, func(old *protocol.TeamBudget) (*protocol.TeamBudget, error) {
				if old == nil {
					old = &protocol.TeamBudget{Type: "team_budget", Version: 1, BudgetUSD: 10}
				}
				old.Calls++
				old.SpentUSD += 0.25
				return old, nil
			})
			if err != nil {
				t.Errorf("update: %v", err)
			}
		})
	}
	wg.Wait()
	tb, err := b.Read(ctx)
	if err != nil || tb.Calls != n || tb.SpentUSD != n*0.25 || tb.BudgetUSD != 10 {
		t.Fatalf("after %d concurrent updates: %v %+v", n, err, tb)
	}
	boom := errors.New("boom")
	if _, err := b.Update(ctx, func(old *protocol.TeamBudget) (*protocol.TeamBudget, error) {
		old.Calls = 0
		return old, boom
	}); !errors.Is(err, boom) {
		t.Fatalf("fn's error: %v", err)
	}
	if tb, _ := b.Read(ctx); tb.Calls != n {
		t.Fatalf("a failed update changed the ledger: %+v", tb)
	}
}
