package monitor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/internal/testenv"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/proc/proctest"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/workermark"
)

// writeRecord writes a worker record with a stale heartbeat.
func writeRecord(t testing.TB, w *Watcher, name string, pid int, start, host string, beat time.Time) {
	t.Helper()
	r := &protocol.Worker{Worker: name, PID: pid, PIDStart: start, Host: host, Epoch: 1, State: "executing",
		HeartbeatAt: beat, ProgressAt: beat, StartedAt: beat, Velocity: 1}
	if err := w.Dir.WriteWorker(r); err != nil {
		t.Fatal(err)
	}
}

// Issue 20: `beat --pid 1` then `watch --once` sent SIGTERM and SIGKILL
// to process group -1, every process. In a PID namespace of its own
// (where this test is pid 1, and kill(-1) would end the bystander), stale
// records naming pid 1, 0, -1, this process and its process group are
// never acted on, and a pass warns about them.
func TestWatchNeverSignalsHostileRecords(t *testing.T) {
	if !proctest.InNamespace(t) {
		return
	}
	bystander := proctest.StartBystander(t)
	w, _ := newWatcher(t)
	w.Opts.Grace = 10 * time.Millisecond
	old := time.Now().Add(-time.Hour)
	self, _ := proc.ReadStat(os.Getpid())
	one, _ := proc.StartTime(1)
	for i, pid := range []int{1, 0, -1, os.Getpid(), self.PGID} {
		writeRecord(t, w, fmt.Sprint(i+1), pid, one, w.Host.Name, old)
	}
	for range 3 {
		res, err := w.Pass(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range res.Events {
			if ev.Action == ActSigterm || ev.Action == ActSigkill {
				t.Fatalf("signalled: %+v", ev)
			}
		}
		if !strings.Contains(fmt.Sprint(res.Errors), "pid 1 is never acted on") {
			t.Fatalf("no warning about pid 1: %v", res.Errors)
		}
		time.Sleep(20 * time.Millisecond)
	}
	bystander.Check(t)
}

// FuzzWatchSignals runs watch passes over random worker records
// (random pids including 0, 1, -1, this process, its parent and group,
// random start times, heartbeats in the past and the future) next to one
// real worker of the test's own, with a Sender that records: every signal
// must target that worker, never anything else.
func FuzzWatchSignals(f *testing.F) {
	for _, seed := range []struct {
		pid   int
		start string
		beat  int64
	}{{1, "", -3600}, {0, "1", -3600}, {-1, "1", -3600}, {-2, "", 0}, {-3, "x", 1 << 40}, {-4, "", -3600},
		{2, "1", -10}, {1 << 22, "5", 4102444800}, {-5, "", -1}} {
		f.Add(seed.pid, seed.start, seed.beat, true)
	}
	rec := &proctest.Recorder{}
	rel := proctest.ReadRelatives()
	f.Fuzz(func(t *testing.T, pid int, start string, beat int64, withChild bool) {
		w, _ := newWatcher(t)
		w.Opts.Grace = 0
		w.Signals = &proc.Signaler{Sender: rec}
		// Negative seeds name this process's relatives.
		pid = rel.Seed(pid)
		start = proctest.RecordStart(pid, start, rel.Hostile(pid))
		now := time.Now()
		writeRecord(t, w, "9", pid, start, w.Host.Name, now.Add(time.Duration(beat)*time.Second))
		var allowed []int
		if withChild {
			c, cs := proctest.Child(t)
			allowed = append(allowed, c)
			writeRecord(t, w, "1", c, cs, w.Host.Name, now.Add(-time.Hour))
		}
		for range 2 {
			if _, err := w.Pass(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if stray := proctest.Stray(rec.Sent(), allowed...); len(stray) > 0 {
			t.Fatalf("record pid %d start %q beat %d: signals %+v, not to a process of this test", pid, start, beat, stray)
		}
	})
}

// A record's process group and session, when it has them, must still be
// the process's: a stale record naming our own child with another group
// or session is never signalled; with the right ones it is.
func TestWatchChecksRecordedGroupAndSession(t *testing.T) {
	c := exec.Command("sleep", "60")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	st, _ := proc.ReadStat(c.Process.Pid)
	rec := &proctest.Recorder{}
	for _, tc := range []struct {
		pgid, sid int
		sent      bool
	}{{st.PGID + 1, st.SID, false}, {st.PGID, st.SID + 1, false}, {st.PGID, st.SID, true}, {0, 0, true}} {
		w, _ := newWatcher(t)
		w.Signals = &proc.Signaler{Sender: rec}
		r := &protocol.Worker{Worker: "1", PID: st.PID, PIDStart: st.Start, PGID: tc.pgid, SID: tc.sid, Host: w.Host.Name, HostID: w.Host.ID, Epoch: 1,
			State: "executing", HeartbeatAt: time.Now().Add(-time.Hour)}
		markWorker(t, w, "1", st.PID, st.Start)
		if err := w.Dir.WriteWorker(r); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := rec.Sent()
		if want := map[bool]int{true: 1, false: 0}[tc.sent]; len(got) != want {
			t.Errorf("record pgid %d sid %d (process: %d, %d): sent %+v", tc.pgid, tc.sid, st.PGID, st.SID, got)
		}
	}
}

// Beat checks everything before it writes: bad values leave no file.
func TestBeatValidatesFirst(t *testing.T) {
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	nan, inf, neg, step, empty, future := math.NaN(), math.Inf(1), -0.5, -1, "", time.Now().Add(time.Hour)
	for _, o := range []BeatOptions{
		{Worker: "1", PID: 1}, {Worker: "1", PID: 0}, {Worker: "1", PID: -1},
		{Worker: "1", PID: c.Process.Pid, CostUSD: &nan}, {Worker: "1", PID: c.Process.Pid, CostUSD: &inf},
		{Worker: "1", PID: c.Process.Pid, CostUSD: &neg}, {Worker: "1", PID: c.Process.Pid, Step: &step},
		{Worker: "1", PID: c.Process.Pid, State: &empty}, {Worker: "1", PID: c.Process.Pid, Now: future},
		{Worker: "../x", PID: c.Process.Pid},
	} {
		home := t.TempDir()
		d := teamdir.Dir{Home: home, Team: "t"}
		o.Home = home
		if _, err := Beat(context.Background(), fileTeam(d), o); !errors.Is(err, ErrInvalid) {
			t.Errorf("Beat(%+v): %v, want ErrInvalid", o, err)
		}
		if ents, _ := os.ReadDir(home); len(ents) != 0 {
			t.Errorf("Beat(%+v) left %v", o, ents)
		}
	}
}

// hostile3 F1: a record alone (written by another user of a shared
// store, or by hand) named an unrelated live process of the monitor's
// user, and the watch SIGTERMed it and its group. A process that carries
// no worker mark of that team and worker is never signalled: the pass
// says why once, leaves it running, and leaves its tasks to their lease.
func TestWatchNeverSignalsUnmarkedProcess(t *testing.T) {
	w, q := newWatcher(t)
	pid, start, done := sleeper(t, "echo ready; exec sleep 1000")
	writeRecord(t, w, "9", pid, start, w.Host.Name, time.Now().Add(-time.Hour))
	q.claim("a", "9")
	// A mark of another worker, or of another team, is no better.
	if err := workermark.Make(w.Dir.Home, pid, start, workermark.Mark{Team: "t", Worker: "8", HostID: w.Host.ID}); err != nil {
		t.Fatal(err)
	}
	res := pass(t, w)
	if got := actions(res); got != "not_signalled:9: " {
		t.Fatalf("first pass: %q, want one not_signalled for worker 9", got)
	}
	want := fmt.Sprintf("not signalled: pid %d carries no worker mark of team t worker 9 in $POWERGLIDE_HOME/run/workers (its mark names team t worker 8); stale: ", pid)
	if r := res.Events[0].Reason; !strings.HasPrefix(r, want) || !strings.HasSuffix(r, "its tasks are left to their lease") {
		t.Fatalf("reason %q, want it to start with %q", r, want)
	}
	if err := workermark.Remove(w.Dir.Home, pid, start); err != nil {
		t.Fatal(err)
	}
	// Said once per process, not at every pass.
	if got := actions(pass(t, w)); got != "" {
		t.Fatalf("second pass: %q", got)
	}
	select {
	case <-done:
		t.Fatal("the unmarked process was signalled")
	case <-time.After(100 * time.Millisecond):
	}
	if len(q.releases) != 0 {
		t.Fatalf("released %v of a worker it could not stop", q.releases)
	}
	b, _ := os.ReadFile(w.Dir.Events())
	if !strings.Contains(string(b), `"action":"not_signalled","worker":"9"`) {
		t.Fatalf("not in the journal:\n%s", b)
	}

	// The same process, marked as worker 9 the way beat marks it, is
	// stopped as before.
	markWorker(t, w, "9", pid, start)
	if got := actions(pass(t, w)); got != "sigterm:9: " {
		t.Fatalf("marked: %q, want a sigterm", got)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the marked worker was not stopped")
	}
}

// A kill in flight gets its SIGKILL only while the worker still carries
// its mark: one that went away since the SIGTERM (a pg-loop removes its
// own as it ends) stops the escalation.
func TestWatchSigkillNeedsMark(t *testing.T) {
	w, _ := newWatcher(t)
	pid, start, done := sleeper(t, "trap '' TERM; echo ready; while :; do sleep 0.05; done")
	markWorker(t, w, "1", pid, start)
	writeRecord(t, w, "1", pid, start, w.Host.Name, time.Now().Add(-time.Hour))
	if got := actions(pass(t, w)); got != "sigterm:1: " {
		t.Fatalf("first pass: %q", got)
	}
	if err := workermark.Remove(w.Dir.Home, pid, start); err != nil {
		t.Fatal(err)
	}
	time.Sleep(w.Opts.Grace)
	res := pass(t, w)
	if got := actions(res); got != "not_signalled:1: " || !strings.HasPrefix(res.Events[0].Reason, "no SIGKILL: pid ") {
		t.Fatalf("after the grace, mark gone: %q %+v", got, res.Events)
	}
	select {
	case <-done:
		t.Fatal("SIGKILLed without a mark")
	case <-time.After(100 * time.Millisecond):
	}
	if res.InFlight != 0 {
		t.Fatalf("%d kills still in flight", res.InFlight)
	}
}

// beat marks the pid it names, so it must refuse a process of another
// user: otherwise any user could have a monitor of this one signal it.
func TestBeatRefusesAnotherUsersProcess(t *testing.T) {
	c := testenv.OtherUsersProcess(t)
	home := t.TempDir()
	d := teamdir.Dir{Home: home, Team: "t"}
	_, err := Beat(context.Background(), fileTeam(d), BeatOptions{Worker: "1", PID: c.Process.Pid, Home: home})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("--pid %d runs as uid 65534, not as this user (uid 0)", c.Process.Pid)) {
		t.Fatalf("beat for a process of uid 65534: %v", err)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
}
