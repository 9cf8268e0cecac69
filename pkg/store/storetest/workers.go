package storetest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// A record stored under another key than the worker it names (a copy
// worker-1-old.json of worker-1.json, a row edited by hand), or under a
// key that is no valid name, is unreadable: listed as an error, never as
// a record of the worker it names, whose tasks a monitor would release
// (hostile review F2). Writes never store a record under another key.
func testWorkerKeys(t *testing.T, e *env) {
	ws := e.team.Workers()
	ctx := t.Context()
	live := &protocol.Worker{Worker: "1", PID: 4242, PIDStart: "77", Host: "box1", State: "executing", Task: "t-1"}
	if err := ws.Write(ctx, live); err != nil {
		t.Fatal(err)
	}
	plantWorker(t, e, "1-old", `{"worker":"1","pid":999999,"pid_start":"1","state":"executing","task":"t-1"}`)
	plantWorker(t, e, "7\x1b[5mX", `{"worker":"7\u001b[5mX","pid":999998,"pid_start":"1"}`)
	list, errs := ws.List(ctx)
	if len(list) != 1 || list[0].Worker != "1" || list[0].PID != 4242 {
		t.Fatalf("list: %+v, want only worker 1's own record", list)
	}
	var msgs []string
	for _, err := range errs {
		msgs = append(msgs, err.Error())
	}
	all := strings.Join(msgs, "\n")
	if len(errs) != 2 || !strings.Contains(all, `names worker "1", not "1-old"`) || !strings.Contains(all, `invalid worker name "7\x1b[5mX"`) {
		t.Fatalf("list errors: %q, want the copy and the invalid name", msgs)
	}
	if strings.ContainsRune(all, 0x1b) {
		t.Fatalf("an error quotes a control character raw: %q", all)
	}
	if rec, err := ws.Read(ctx, "1-old"); err == nil {
		t.Fatalf("read the copy: %+v, want an error", rec)
	}
	if rec, err := ws.Read(ctx, "1"); err != nil || rec.PID != 4242 {
		t.Fatalf("read worker 1: %v %+v", err, rec)
	}
	// An update of the copy's key replaces it with a record of its own
	// name (a heartbeat goes through an unreadable record); one that
	// would keep the other name is refused.
	if _, err := ws.Update(ctx, "1-old", func(old *protocol.Worker) (*protocol.Worker, error) {
		if old != nil {
			t.Errorf("update hands over the copy: %+v", old)
		}
		return &protocol.Worker{Worker: "1", PID: 999999, PIDStart: "1"}, nil
	}); !badInput(err) {
		t.Fatalf("update storing worker 1's record under 1-old: %v, want bad input", err)
	}
	if _, err := ws.Update(ctx, "1-old", func(*protocol.Worker) (*protocol.Worker, error) {
		return &protocol.Worker{Worker: "1-old", State: "idle"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if rec, err := ws.Read(ctx, "1-old"); err != nil || rec.Worker != "1-old" {
		t.Fatalf("after the update: %v %+v", err, rec)
	}
	if err := ws.Write(ctx, &protocol.Worker{Worker: "../1"}); !badInput(err) {
		t.Fatalf("write an invalid name: %v", err)
	}
}

// plantWorker stores raw under key as a writer outside the toolkit would:
// a file in the team directory, a row written with SQL.
func plantWorker(t *testing.T, e *env, key, raw string) {
	t.Helper()
	if dir, ok := strings.CutPrefix(e.url, "file:"); ok {
		path := filepath.Join(dir, "teams", e.team.Name(), "worker-"+key+".json")
		if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO workers (team, worker, record) VALUES ($1, $2, $3::json)
		ON CONFLICT (team, worker) DO UPDATE SET record = excluded.record`, e.team.Name(), key, raw); err != nil {
		t.Fatal(err)
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
