package pgmonitor_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// record writes worker-<n>.json as a worker would.
func (tm *team) record(n string, pid int, start string, beat time.Time, task string) {
	tm.t.Helper()
	host, _ := os.Hostname()
	rec := &protocol.Worker{Worker: n, PID: pid, PIDStart: start, Host: host, State: "executing", Task: task,
		HeartbeatAt: beat, ProgressAt: beat, StartedAt: beat}
	if err := tm.dir.WriteWorker(rec); err != nil {
		tm.t.Fatal(err)
	}
}

// claim makes worker n claim the next task in the queue.
func (tm *team) claim(n string) string {
	tm.t.Helper()
	out := tm.queue("claim", "--worker", n)
	i := strings.Index(out, `"id":"`)
	return strings.SplitN(out[i+6:], `"`, 2)[0]
}

// A recorded pid whose start time does not match is never signalled: the
// process there is not the worker. The worker counts as dead, so its task
// is released.
func TestWatchPidReused(t *testing.T) {
	t.Parallel()
	tm := newTeam(t, "a")
	other := tm.spawn("x", "sleep", "1000")
	start, err := proc.StartTime(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	wrong := start + "1"
	tm.record("1", other.Process.Pid, wrong, time.Now().Add(-time.Hour), tm.claim("1"))
	code, out, errs := tm.run(context.Background(), append([]string{"watch", "--once"}, short...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !alive(other.Process.Pid) || !proc.Matches(other.Process.Pid, start) {
		t.Fatal("the process holding the reused pid was signalled")
	}
	if n := tm.count("sigterm", "") + tm.count("sigkill", ""); n != 0 {
		t.Fatalf("%d signals recorded", n)
	}
	if tm.count("release", "1") != 1 || len(tm.tasks("pending")) != 1 {
		tm.dump()
		t.Fatalf("task of the dead worker not released; watch printed %s", out)
	}
	if !strings.Contains(out, `"action":"release"`) {
		t.Errorf("watch did not print its action: %q", out)
	}
}

// Two watch processes run at once over stale workers (one ignores
// SIGTERM) and dead ones: each signal is sent and each task released
// exactly once.
func TestWatchConcurrent(t *testing.T) {
	t.Parallel()
	for _, q := range queues {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			testWatchConcurrent(t, q)
		})
	}
}

func testWatchConcurrent(t *testing.T, queue string) {
	const stale, dead = 4, 3
	var ids []string
	for i := 0; i < stale+dead; i++ {
		ids = append(ids, "t"+strconv.Itoa(i))
	}
	tm := newTeamWith(t, queue, ids...)
	old := time.Now().Add(-time.Minute)
	var pids []int
	for i := 1; i <= stale; i++ {
		n := strconv.Itoa(i)
		script := "sleep 1000"
		if i == 1 {
			script = "trap '' TERM; touch \"$POWERGLIDE_HOME/trapped\"; while :; do sleep 1; done"
		}
		c := tm.spawn(n, "sh", "-c", script)
		if i == 1 {
			waitFor(t, "the trap to be set", 30*time.Second, func() bool {
				_, err := os.Stat(tm.home + "/trapped")
				return err == nil
			})
		}
		start, _ := proc.StartTime(c.Process.Pid)
		tm.record(n, c.Process.Pid, start, old, tm.claim(n))
		pids = append(pids, c.Process.Pid)
	}
	for i := stale + 1; i <= stale+dead; i++ {
		n := strconv.Itoa(i)
		c := exec.Command("true")
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
		tm.record(n, c.Process.Pid, "1", old, tm.claim(n))
	}
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd, out := tm.start(append([]string{"watch", "--once"}, short...)...)
			err := cmd.Wait()
			outs[i] = fmt.Sprintf("%v\n%s", err, out)
		}()
	}
	wg.Wait()
	for _, pid := range pids {
		waitFor(t, "stale workers to end", 30*time.Second, func() bool { return !alive(pid) })
	}
	bad := false
	for i := 1; i <= stale+dead; i++ {
		n := strconv.Itoa(i)
		want := 0
		if i <= stale {
			want = 1
		}
		if got := tm.count("sigterm", n); got != want {
			t.Errorf("worker %s: %d SIGTERMs, want %d", n, got, want)
			bad = true
		}
		if got := tm.count("release", n); got != 1 {
			t.Errorf("worker %s: %d releases, want 1", n, got)
			bad = true
		}
	}
	if got := tm.count("sigkill", ""); got != 1 {
		t.Errorf("%d SIGKILLs, want 1 (the worker ignoring SIGTERM)", got)
		bad = true
	}
	if n := tm.releases(); n != stale+dead {
		t.Errorf("queue saw %d releases, want %d", n, stale+dead)
		bad = true
	}
	if bad {
		tm.dump()
		t.Logf("watchers:\n%s\n%s", outs[0], outs[1])
	}
}

// Cron-style workers, started outside run, are supervised by repeated
// `watch --once`: the hanging one is stopped, its task released and
// finished by the other worker.
func TestWatchOnceCron(t *testing.T) {
	t.Parallel()
	tm := newTeam(t, "hang-1", "a", "b")
	w1 := tm.spawn("1", workerSh)
	waitFor(t, "worker 1 to claim hang-1", 30*time.Second, func() bool {
		for _, task := range tm.tasks("claimed") {
			if task.ID == "hang-1" {
				return true
			}
		}
		return false
	})
	// Cron runs worker 2 again whenever it is not running, and
	// `watch --once` every tick.
	var w2 *exec.Cmd
	waitFor(t, "every task done", 60*time.Second, func() bool {
		if w2 == nil || !alive(w2.Process.Pid) {
			w2 = tm.spawn("2", workerSh)
		}
		code, _, errs := tm.run(context.Background(), append([]string{"watch", "--once"}, short...)...)
		if code != 0 {
			t.Fatalf("watch --once: exit %d: %s", code, errs)
		}
		return len(tm.tasks("done")) == 3
	})
	if alive(w1.Process.Pid) {
		t.Fatal("the hanging worker is still running")
	}
	if tm.count("sigterm", "1") != 1 || tm.count("release", "1") != 1 {
		tm.dump()
		t.Fatal("want worker 1 stopped once and its task released once")
	}
}

// Watchers killed with SIGKILL at random points, with others running:
// no task is lost or released twice, no worker gets a second SIGTERM or
// SIGKILL, and every stale worker ends.
func TestWatchKill9(t *testing.T) {
	t.Parallel()
	const stale, dead = 5, 3
	var ids []string
	for i := 1; i <= stale+dead; i++ {
		ids = append(ids, "k"+strconv.Itoa(i))
	}
	tm := newTeamWith(t, "pg-queue", ids...)
	old := time.Now().Add(-time.Minute)
	var pids []int
	for i := 1; i <= stale; i++ {
		n := strconv.Itoa(i)
		c := tm.spawn(n, "sleep", "1000")
		start, _ := proc.StartTime(c.Process.Pid)
		tm.record(n, c.Process.Pid, start, old, tm.claim(n))
		pids = append(pids, c.Process.Pid)
	}
	for i := stale + 1; i <= stale+dead; i++ {
		n := strconv.Itoa(i)
		c := exec.Command("true")
		if err := c.Run(); err != nil {
			t.Fatal(err)
		}
		tm.record(n, c.Process.Pid, "1", old, tm.claim(n))
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	watch := []string{"watch", "--heartbeat", "1s", "--interval", "20ms", "--grace", "300ms"}
	for round := 0; round < 4; round++ {
		var cmds []*exec.Cmd
		for i := 0; i < 3; i++ {
			c, _ := tm.start(watch...)
			cmds = append(cmds, c)
		}
		time.Sleep(time.Duration(rng.Intn(400)) * time.Millisecond)
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}
	// Whatever the crashes left in flight, one last watcher finishes it.
	code, _, errs := tm.run(context.Background(), append([]string{"watch", "--once"}, short...)...)
	if code != 0 {
		t.Fatalf("watch --once: exit %d: %s", code, errs)
	}
	for _, pid := range pids {
		waitFor(t, "stale workers to end", 30*time.Second, func() bool { return !alive(pid) })
	}
	bad := false
	for i := 1; i <= stale+dead; i++ {
		n := strconv.Itoa(i)
		if tm.count("sigterm", n) > 1 || tm.count("sigkill", n) > 1 {
			t.Errorf("worker %s signalled twice", n)
			bad = true
		}
		if got := tm.count("release", n); got > 1 {
			t.Errorf("worker %s: %d release events", n, got)
			bad = true
		}
	}
	if n := tm.releases(); n != stale+dead {
		t.Errorf("queue saw %d releases, want %d", n, stale+dead)
		bad = true
	}
	if n := len(tm.tasks("pending")); n != stale+dead {
		t.Errorf("%d tasks pending, want %d", n, stale+dead)
		bad = true
	}
	if bad {
		tm.dump()
	}
}
