package filestore

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

func team(t *testing.T) (store.Team, string) {
	t.Helper()
	home := t.TempDir()
	s := Open(home, Options{})
	t.Cleanup(func() { s.Close() })
	tm, err := s.Team("t")
	if err != nil {
		t.Fatal(err)
	}
	return tm, filepath.Join(home, "teams", "t")
}

// TestTeamName: an invalid team name is bad input, and nothing is created.
func TestTeamName(t *testing.T) {
	home := t.TempDir()
	_, err := Open(home, Options{}).Team("../x")
	var bi interface{ BadInput() bool }
	if !errors.As(err, &bi) || !bi.BadInput() {
		t.Fatalf("Team(../x) = %v, want bad input", err)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Fatalf("created %v", ents)
	}
}

// TestReadsCreateNothing: reading a team that does not exist sees it empty
// and leaves no directory; Exists says it is not there.
func TestReadsCreateNothing(t *testing.T) {
	tm, dir := team(t)
	ctx := context.Background()
	if err := tm.Exists(ctx); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Exists = %v, want fs.ErrNotExist", err)
	}
	if ts, err := tm.Tasks().List(queue.ListOptions{}); err != nil || len(ts) != 0 {
		t.Fatalf("list: %v %v", ts, err)
	}
	if ws, errs := tm.Workers().List(ctx); len(ws) != 0 || len(errs) != 0 {
		t.Fatalf("workers: %v %v", ws, errs)
	}
	if _, err := tm.Workers().Read(ctx, "1"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read worker: %v", err)
	}
	if _, err := tm.Budget().Read(ctx); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read budget: %v", err)
	}
	if v, err := tm.Workers().Velocity(ctx, "1"); v != 1 || err != nil {
		t.Fatalf("velocity: %v %v", v, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a read created the team: %v", err)
	}
	if err := tm.Journal().Append(ctx, map[string]any{"type": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := tm.Exists(ctx); err != nil {
		t.Fatalf("Exists after a change: %v", err)
	}
}

// TestWorkersFiles: records are the worker-<n>.json files the tools always
// wrote, velocity the worker-<n>.velocity file.
func TestWorkersFiles(t *testing.T) {
	tm, dir := team(t)
	ctx := context.Background()
	ws := tm.Workers()
	if err := ws.Write(ctx, &protocol.Worker{Worker: "2", State: "idle", Host: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := ws.Write(ctx, &protocol.Worker{Worker: "10", State: "executing"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "worker-2.json"))
	if err != nil || !strings.Contains(string(b), `"host": "a"`) {
		t.Fatalf("worker-2.json: %s %v", b, err)
	}
	os.WriteFile(filepath.Join(dir, "worker-bad.json"), []byte("{"), 0o600)
	list, errs := ws.List(ctx)
	if len(list) != 2 || list[0].Worker != "2" || list[1].Worker != "10" || len(errs) != 1 {
		t.Fatalf("list: %v %v", list, errs)
	}
	if err := ws.SetVelocity(ctx, "2", 0.5); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "worker-2.velocity")); string(b) != "0.5\n" {
		t.Fatalf("velocity file %q", b)
	}
	if v, err := ws.Velocity(ctx, "2"); v != 0.5 || err != nil {
		t.Fatalf("velocity %v %v", v, err)
	}
	os.WriteFile(filepath.Join(dir, "worker-2.velocity"), []byte("fast"), 0o600)
	if _, err := ws.Velocity(ctx, "2"); err == nil || !strings.Contains(err.Error(), `velocity "fast"`) {
		t.Fatalf("bad velocity file: %v", err)
	}
	if err := ws.SetVelocity(ctx, "2", -1); err == nil {
		t.Fatal("negative velocity accepted")
	}
	if err := ws.Write(ctx, &protocol.Worker{Worker: "a/b"}); err == nil {
		t.Fatal("worker a/b accepted")
	}
}

// TestWorkersUpdateSerialized: concurrent read-modify-writes of one record
// lose nothing, as beat's under the worker lock never did.
func TestWorkersUpdateSerialized(t *testing.T) {
	tm, _ := team(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				_, err := tm.Workers().Update(ctx, "1", func(old *protocol.Worker) (*protocol.Worker, error) {
					if old == nil {
						old = &protocol.Worker{Worker: "1"}
					}
					old.Step++
					return old, nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	w, err := tm.Workers().Read(ctx, "1")
	if err != nil || w.Step != 80 {
		t.Fatalf("step %v %v, want 80", w, err)
	}
	// fn returning nil writes nothing.
	if _, err := tm.Workers().Update(ctx, "3", func(*protocol.Worker) (*protocol.Worker, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Workers().Read(ctx, "3"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("nil wrote a record: %v", err)
	}
}

// TestBudgetUpdate: budget.json changes under the team lock; concurrent
// updates add up.
func TestBudgetUpdate(t *testing.T) {
	tm, dir := team(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := tm.Budget().Update(ctx, func(old *protocol.TeamBudget) (*protocol.TeamBudget, error) {
				if old == nil {
					old = &protocol.TeamBudget{Type: "team_budget", Version: 1, BudgetUSD: 5}
				}
				old.Calls++
				return old, nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b, err := os.ReadFile(filepath.Join(dir, teamdir.BudgetFile))
	if err != nil {
		t.Fatal(err)
	}
	var tb protocol.TeamBudget
	if err := json.Unmarshal(b, &tb); err != nil || tb.Calls != 10 || tb.BudgetUSD != 5 {
		t.Fatalf("budget.json: %s %v", b, err)
	}
}

// TestFollowSettles: a writer killed after committing a claim but before
// journaling it; a follower of the journal appends the claim's event itself
// once the queue is quiet, as pg-queue watch always did.
func TestFollowSettles(t *testing.T) {
	tm, _ := team(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := tm.Tasks().Add([]protocol.Task{{ID: "a", Title: "a"}}); err != nil {
		t.Fatal(err)
	}
	q := tm.Tasks().(*queue.Queue)
	q.Crash = func(p string) bool { return p == "archived" }
	_, err := q.Claim("w", time.Minute)
	q.Crash = nil
	if err == nil {
		t.Fatal("the killed claim returned no error")
	}
	fl, err := tm.Journal().Follow(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	var ops []string
	for len(ops) < 2 {
		line, err := fl.Next(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", ops, err)
		}
		var ev protocol.TaskEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, ev.Op+" "+ev.Task)
	}
	if strings.Join(ops, ",") != "add a,claim a" {
		t.Fatalf("journal %v", ops)
	}
}

// TestIrregularTeamFiles: a velocity, an approval or budget.json that is a
// named pipe with no writer, or a link, is an error naming the file at
// once, for the readers and for the ledger's update, not a read blocked
// in open(2) or one that follows the link.
func TestIrregularTeamFiles(t *testing.T) {
	tm, dir := team(t)
	ctx := context.Background()
	if err := os.MkdirAll(dir, teamdir.DirMode); err != nil {
		t.Fatal(err)
	}
	mkfifo := func(name string) {
		t.Helper()
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mkfifo("worker-1.velocity")
	mkfifo(teamdir.BudgetFile)
	mkfifo("worker-1.approval")
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "worker-2.velocity")); err != nil {
		t.Fatal(err)
	}
	done := make(chan []error, 1)
	go func() {
		var errs []error
		_, err := tm.Workers().Velocity(ctx, "1")
		errs = append(errs, err)
		_, err = tm.Workers().Velocity(ctx, "2")
		errs = append(errs, err)
		_, err = tm.Budget().Read(ctx)
		errs = append(errs, err)
		_, err = tm.Budget().Update(ctx, func(old *protocol.TeamBudget) (*protocol.TeamBudget, error) {
			return &protocol.TeamBudget{Type: "team_budget", Version: 1}, nil
		})
		errs = append(errs, err)
		_, _, err = tm.Workers().TakeAnswer(ctx, "1", "c1")
		errs = append(errs, err)
		done <- errs
	}()
	var errs []error
	select {
	case errs = <-done:
	case <-time.After(time.Minute):
		t.Fatal("still blocked after a minute")
	}
	for i, want := range []string{
		"worker-1.velocity: a named pipe (FIFO), not a regular file: refused",
		"worker-2.velocity: a symbolic link, not a regular file: refused",
		"budget.json: a named pipe (FIFO), not a regular file: refused",
		"budget.json: a named pipe (FIFO), not a regular file: refused",
		"worker-1.approval: a named pipe (FIFO), not a regular file: refused",
	} {
		if errs[i] == nil || !strings.HasSuffix(errs[i].Error(), want) {
			t.Errorf("read %d: %v, want an error ending %q", i, errs[i], want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, teamdir.BudgetFile)); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("budget.json replaced after a refused read: %v %v", fi, err)
	}
}
