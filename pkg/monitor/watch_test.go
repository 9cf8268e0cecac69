package monitor

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/filestore"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/workermark"
)

// memQueue is an in-memory Queue with pg-queue's fencing rules.
type memQueue struct {
	mu       sync.Mutex
	tasks    []*protocol.Task
	token    int64
	releases []string
}

func (q *memQueue) claim(id, worker string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.token++
	q.tasks = append(q.tasks, &protocol.Task{ID: id, Status: protocol.StatusClaimed, Claim: &protocol.Claim{Worker: worker, Token: q.token}})
}

func (q *memQueue) Claimed(context.Context) ([]protocol.Task, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []protocol.Task
	for _, t := range q.tasks {
		if t.Status == protocol.StatusClaimed {
			out = append(out, *t)
		}
	}
	return out, nil
}

func (q *memQueue) Release(_ context.Context, id string, token int64) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, t := range q.tasks {
		if t.ID == id && t.Status == protocol.StatusClaimed && t.Claim.Token == token {
			t.Status, t.Claim = protocol.StatusPending, nil
			q.releases = append(q.releases, id)
			return true, nil
		}
	}
	return false, nil
}

func (q *memQueue) Stats(context.Context) (Stats, error) { return Stats{}, nil }

func newWatcher(t testing.TB) (*Watcher, *memQueue) {
	q := &memQueue{}
	w := &Watcher{Dir: teamdir.Dir{Home: t.TempDir(), Team: "t"}, Queue: q, Host: proc.ThisHost(),
		Opts: Options{Heartbeat: time.Second, Stall: 2 * time.Second, Grace: 300 * time.Millisecond}}
	if err := w.Dir.Ensure(); err != nil {
		t.Fatal(err)
	}
	return w, q
}

// sleeper starts a process in its own group, waits until the script has
// set up (its traps), and reaps it when it ends.
func sleeper(t *testing.T, script string) (int, string, <-chan struct{}) {
	t.Helper()
	c := exec.Command("sh", "-c", script)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("script did not start: %v", err)
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL); <-done })
	start, err := proc.StartTime(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid, start, done
}

// markWorker marks pid as worker name of w's team, as pg-loop, pg-monitor
// run and beat do for a real worker: without it no signal is sent.
func markWorker(t testing.TB, w *Watcher, name string, pid int, start string) {
	t.Helper()
	if err := workermark.Make(w.Dir.Home, pid, start, workermark.Mark{Team: w.Dir.Team, Worker: name, HostID: w.Host.ID}); err != nil {
		t.Fatal(err)
	}
}

func actions(res *Result) string {
	s := ""
	for _, e := range res.Events {
		s += fmt.Sprintf("%s:%s:%s ", e.Action, e.Worker, e.Task)
	}
	return s
}

func pass(t *testing.T, w *Watcher) *Result {
	t.Helper()
	res, err := w.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Errors {
		t.Errorf("pass: %v", e)
	}
	return res
}

// A stuck worker (fresh heartbeat, no progress) is stopped like a stale one,
// and its task is released once its process has ended.
func TestPassStuck(t *testing.T) {
	w, q := newWatcher(t)
	pid, start, done := sleeper(t, "echo ready; exec sleep 1000")
	now := time.Now()
	rec := &protocol.Worker{Worker: "1", PID: pid, PIDStart: start, Host: w.Host.Name, HostID: w.Host.ID, State: "executing", Task: "a",
		HeartbeatAt: now, ProgressAt: now.Add(-time.Hour)}
	markWorker(t, w, "1", pid, start)
	if err := w.Dir.WriteWorker(rec); err != nil {
		t.Fatal(err)
	}
	q.claim("a", "1")
	q.claim("b", "2") // another worker's
	if got := actions(pass(t, w)); got != "sigterm:1:a " {
		t.Fatalf("first pass: %q", got)
	}
	if got := actions(pass(t, w)); got != "" && got != "release:1:a " {
		t.Fatalf("second pass repeated an action: %q", got)
	}
	<-done
	res := pass(t, w)
	if len(q.releases) != 1 || q.releases[0] != "a" {
		t.Fatalf("releases %v after %q", q.releases, actions(res))
	}
	if got := actions(pass(t, w)); got != "" {
		t.Fatalf("pass after the release acted again: %q", got)
	}
	st, _ := w.loadState()
	if len(st.Kills) != 0 {
		t.Fatalf("kills still in flight: %+v", st.Kills)
	}
}

// A worker ignoring SIGTERM is SIGKILLed once the grace period is over, not
// before.
func TestPassGrace(t *testing.T) {
	w, _ := newWatcher(t)
	pid, start, done := sleeper(t, "trap '' TERM; echo ready; while :; do sleep 0.05; done")
	markWorker(t, w, "1", pid, start)
	if err := w.Dir.WriteWorker(&protocol.Worker{Worker: "1", PID: pid, PIDStart: start, HeartbeatAt: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	if got := actions(pass(t, w)); got != "sigterm:1: " {
		t.Fatalf("first pass: %q", got)
	}
	for {
		res := pass(t, w)
		if got := actions(res); got != "" {
			if got != "sigkill:1: " {
				t.Fatalf("got %q, want a SIGKILL", got)
			}
			if d := time.Since(first); d < w.Opts.Grace {
				t.Fatalf("SIGKILL %s after SIGTERM, before the grace period", d)
			}
			break
		}
		if !proc.Matches(pid, start) {
			t.Fatal("process ended despite ignoring SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
	<-done
}

// A watcher killed after saving its SIGKILL intent but before sending it
// leaves the worker running with KillAt set: the next watcher sends the
// SIGKILL once the intent is killRetry old, rather than wait forever.
func TestPassKillIntentLost(t *testing.T) {
	w, _ := newWatcher(t)
	pid, start, done := sleeper(t, "trap '' TERM; echo ready; while :; do sleep 0.05; done")
	markWorker(t, w, "1", pid, start)
	if err := w.Dir.WriteWorker(&protocol.Worker{Worker: "1", PID: pid, PIDStart: start, Host: w.Host.Name, HostID: w.Host.ID, HeartbeatAt: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	st, err := w.loadState()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	st.Kills["1"] = &Kill{PID: pid, PIDStart: start, TermAt: now.Add(-time.Minute), KillAt: now.Add(-time.Second), Reason: "stale: test"}
	if err := w.saveState(st); err != nil {
		t.Fatal(err)
	}
	// A second old intent is not yet overdue: nothing is sent.
	if got := actions(pass(t, w)); got != "" {
		t.Fatalf("pass within killRetry: %q", got)
	}
	st, _ = w.loadState()
	st.Kills["1"].KillAt = now.Add(-killRetry - time.Second)
	if err := w.saveState(st); err != nil {
		t.Fatal(err)
	}
	res := pass(t, w)
	if got := actions(res); got != "sigkill:1: " {
		t.Fatalf("pass after the lost intent: %q", got)
	}
	if r := res.Events[0].Reason; !strings.Contains(r, "was never sent (its watcher died)") {
		t.Fatalf("reason %q", r)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker survived the second SIGKILL")
	}
	// A SIGKILL recorded as sent is never repeated, even when its process
	// outlives it (uninterruptible sleep): each action is taken once.
	k := &Kill{TermAt: now.Add(-time.Hour), KillAt: now.Add(-time.Hour), KillSent: true}
	if due, _ := w.killDue(k, now); due {
		t.Fatal("a sent SIGKILL is due again")
	}
	k.KillSent = false
	if due, again := w.killDue(k, now); !due || !again {
		t.Fatal("a SIGKILL meant an hour ago and never sent is not due")
	}
}

// When SIGTERM ends a stale worker's leader but a member of its process
// group ignores it (a child, a background job), the member gets SIGKILL
// after the grace period: the group is still the recorded one while a
// member seen before is alive in it.
func TestPassLeftoverGroupMembers(t *testing.T) {
	w, _ := newWatcher(t)
	pid, start, done := sleeper(t, "(trap '' TERM; echo ready; exec sleep 1000) & wait")
	var child proc.Member
	members, err := proc.GroupMembers(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.PID != pid {
			child = m
		}
	}
	if child.PID == 0 {
		t.Fatalf("no child in the group: %v", members)
	}
	markWorker(t, w, "1", pid, start)
	if err := w.Dir.WriteWorker(&protocol.Worker{Worker: "1", PID: pid, PIDStart: start, HeartbeatAt: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	if got := actions(pass(t, w)); got != "sigterm:1: " {
		t.Fatalf("first pass: %q", got)
	}
	<-done // the leader ended on SIGTERM
	for {
		res := pass(t, w)
		if got := actions(res); got != "" {
			if got != "sigkill:1: " {
				t.Fatalf("got %q, want a SIGKILL of the rest of the group", got)
			}
			if d := time.Since(first); d < w.Opts.Grace {
				t.Fatalf("SIGKILL %s after SIGTERM, before the grace period", d)
			}
			t.Logf("%s", res.Events[0].Reason)
			break
		}
		if !proc.Matches(child.PID, child.Start) {
			t.Fatal("the child ended despite ignoring SIGTERM")
		}
		if time.Since(first) > 30*time.Second {
			t.Fatal("the rest of the group was never killed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !waitGone(context.Background(), child.PID, child.Start, 10*time.Second) {
		t.Fatal("the child survived SIGKILL")
	}
	if res := pass(t, w); res.InFlight != 0 {
		t.Fatalf("%d kills still in flight", res.InFlight)
	}
}

// Records from another host, and records without a pid, are never
// signalled and their tasks are left to lease expiry.
func TestPassUnverifiable(t *testing.T) {
	w, q := newWatcher(t)
	old := time.Now().Add(-time.Hour)
	pid, start, _ := sleeper(t, "echo ready; exec sleep 1000")
	for _, r := range []*protocol.Worker{
		{Worker: "1", PID: pid, PIDStart: start, Host: "elsewhere", HeartbeatAt: old},
		{Worker: "2", HeartbeatAt: old},
	} {
		if err := w.Dir.WriteWorker(r); err != nil {
			t.Fatal(err)
		}
		q.claim("t"+r.Worker, r.Worker)
	}
	res := pass(t, w)
	if got := actions(res); got != "" {
		t.Fatalf("acted on unverifiable workers: %q", got)
	}
	for _, s := range res.Workers {
		if s.Liveness != string(Stale) {
			t.Errorf("worker %s: %s, want stale", s.Worker, s.Liveness)
		}
	}
	if !proc.Matches(pid, start) {
		t.Fatal("the other host's pid was signalled")
	}
}

// A lost lease (the task moved on) is not an error and not an action.
func TestPassLeaseLost(t *testing.T) {
	w, q := newWatcher(t)
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	if err := w.Dir.WriteWorker(&protocol.Worker{Worker: "1", PID: c.Process.Pid, PIDStart: "1", HeartbeatAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	q.claim("a", "1")
	q.tasks[0].Claim.Token = 99 // the queue moved on after the listing
	lost := &lostQueue{memQueue: q}
	w.Queue = lost
	if got := actions(pass(t, w)); got != "" {
		t.Fatalf("acted: %q", got)
	}
	if lost.calls != 1 {
		t.Fatalf("%d release calls", lost.calls)
	}
	pass(t, w)
	if lost.calls != 1 {
		t.Fatal("the dead incarnation was handled twice")
	}
}

type lostQueue struct {
	*memQueue
	calls int
}

func (q *lostQueue) Release(context.Context, string, int64) (bool, error) {
	q.calls++
	return false, nil
}

func TestBeat(t *testing.T) {
	d := teamdir.Dir{Home: t.TempDir(), Team: "t"}
	pid := os.Getpid()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	state := "executing"
	r, err := Beat(context.Background(), fileTeam(d), BeatOptions{Worker: "3", Home: d.Home, PID: pid, State: &state, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if r.Epoch != 1 || r.State != "executing" || !r.HeartbeatAt.Equal(t0) || !r.ProgressAt.Equal(t0) {
		t.Fatalf("first beat: %+v", r)
	}
	if err := workermark.Check(d.Home, pid, r.PIDStart, "t", "3", ""); err != nil {
		t.Fatalf("beat made no mark: %v", err)
	}
	r, err = Beat(context.Background(), fileTeam(d), BeatOptions{Worker: "3", Home: d.Home, PID: pid, Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Epoch != 1 || !r.HeartbeatAt.Equal(t0.Add(time.Minute)) || !r.ProgressAt.Equal(t0) || r.State != "executing" {
		t.Fatalf("a plain beat must move only the heartbeat: %+v", r)
	}
	task := "t-1"
	cost := 0.3
	r, _ = Beat(context.Background(), fileTeam(d), BeatOptions{Worker: "3", Home: d.Home, PID: pid, Task: &task, CostUSD: &cost, Now: t0.Add(2 * time.Minute)})
	if !r.ProgressAt.Equal(t0.Add(2*time.Minute)) || r.Task != "t-1" {
		t.Fatalf("a task change is progress: %+v", r)
	}
	// Another process takes the worker name: a new epoch.
	c := exec.Command("sleep", "10")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	r, err = Beat(context.Background(), fileTeam(d), BeatOptions{Worker: "3", Home: d.Home, PID: c.Process.Pid})
	if err != nil {
		t.Fatal(err)
	}
	if r.Epoch != 2 || r.PID != c.Process.Pid || r.Task != "" {
		t.Fatalf("new process: %+v", r)
	}
	// ... which keeps what the earlier process spent.
	if r.Spent == nil || r.Spent.CostUSD != 0.3 || r.Usage.CostUSD != 0 {
		t.Fatalf("new process: spent %+v, usage %+v; want the earlier 0.3 in spent", r.Spent, r.Usage)
	}
	if _, err := Beat(context.Background(), fileTeam(d), BeatOptions{Worker: "3", Home: d.Home, PID: 1 << 22}); err == nil {
		t.Fatal("beat for a missing pid succeeded")
	}
	if _, err := Beat(context.Background(), fileTeam(d), BeatOptions{Worker: "../x", Home: d.Home, PID: pid}); err == nil {
		t.Fatal("bad worker name accepted")
	}
}

// BenchmarkPass is one watch pass over 256 worker records of live
// processes (the steady state: read, probe, classify, no action).
func BenchmarkPass(b *testing.B) {
	w, _ := newWatcher(b)
	pid, start, err := proc.Self()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for i := 0; i < 256; i++ {
		r := &protocol.Worker{Worker: strconv.Itoa(i), PID: pid, PIDStart: start, Host: w.Host.Name, HostID: w.Host.ID, State: "executing",
			Task: "t-" + strconv.Itoa(i), HeartbeatAt: now.Add(time.Hour), ProgressAt: now.Add(time.Hour)}
		if err := w.Dir.WriteWorker(r); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := w.Pass(ctx)
		if err != nil || len(res.Workers) != 256 || len(res.Events) != 0 {
			b.Fatalf("pass: %v, %d workers, %d events", err, len(res.Workers), len(res.Events))
		}
	}
}

// fileTeam is the team of directory d in the file store.
func fileTeam(d teamdir.Dir) store.Team {
	tm, err := filestore.Open(d.Home, filestore.Options{}).Team(d.Team)
	if err != nil {
		panic(err)
	}
	return tm
}
