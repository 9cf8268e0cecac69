package pgmonitor_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

func args(a ...[]string) []string {
	var out []string
	for _, x := range a {
		out = append(out, x...)
	}
	return out
}

// A worker that hangs stops beating; it is stopped, its task goes back to
// the queue and another worker finishes it. A worker that crashes holding
// a claim is restarted and its task finished too.
func TestRunHangAndCrash(t *testing.T) {
	t.Parallel()
	for _, q := range queues {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			testRunHangAndCrash(t, q)
		})
	}
}

func testRunHangAndCrash(t *testing.T, queue string) {
	tm := newTeamWith(t, queue, "hang-1", "crash-1", "a", "b")
	code, out, errs := tm.run(context.Background(), args([]string{"run", "--workers", "2", "--backoff", "50ms"}, short, []string{"--", workerSh})...)
	if code != 0 || strings.TrimSpace(out) != "<POWERGLIDE_DONE>" {
		tm.dump()
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	if n := len(tm.tasks("done")); n != 4 {
		t.Fatalf("%d tasks done, want 4", n)
	}
	var term, released map[string]bool = map[string]bool{}, map[string]bool{}
	for _, ev := range tm.events() {
		switch ev.Action {
		case "sigterm":
			if !strings.Contains(ev.Reason, "stale") {
				t.Errorf("sigterm reason %q does not say stale", ev.Reason)
			}
			term[ev.Worker] = true
			// The reason gives the heartbeat's age when it was found stale:
			// at most the limit plus one interval (plus the pass itself).
			t.Logf("stopped: %s", ev.Reason)
		case "release":
			released[ev.Task] = true
			if ev.Reason == "" {
				t.Errorf("release without a reason: %+v", ev)
			}
		}
	}
	if len(term) != 1 || !released["hang-1"] || !released["crash-1"] {
		tm.dump()
		t.Fatalf("want one worker stopped and hang-1, crash-1 released; got sigterm %v, released %v", term, released)
	}
	if tm.count("restart", "") < 2 {
		t.Errorf("want at least 2 restarts (hang, crash), got %d", tm.count("restart", ""))
	}
	if tm.count("done", "") != 1 {
		t.Errorf("want one done event")
	}
}

// A worker that ignores SIGTERM is SIGKILLed after the grace period.
func TestRunSigtermIgnored(t *testing.T) {
	t.Parallel()
	tm := newTeam(t, "stubborn-1")
	code, out, errs := tm.run(context.Background(), args([]string{"run", "--workers", "1", "--backoff", "50ms"}, short, []string{"--", workerSh})...)
	if code != 0 {
		tm.dump()
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	evs := tm.events()
	var termAt, killAt time.Time
	for _, ev := range evs {
		switch ev.Action {
		case "sigterm":
			termAt = ev.TS
		case "sigkill":
			killAt = ev.TS
		}
	}
	if termAt.IsZero() || killAt.IsZero() || killAt.Sub(termAt) < 500*time.Millisecond {
		tm.dump()
		t.Fatalf("want SIGTERM then SIGKILL at least the grace (500ms) later; got %v, %v", termAt, killAt)
	}
	t.Logf("SIGKILL %s after SIGTERM (grace 500ms)", killAt.Sub(termAt))
	if testing.Verbose() {
		tm.dump()
	}
	if n := len(tm.tasks("done")); n != 1 {
		t.Fatalf("%d tasks done, want 1", n)
	}
}

// A worker that keeps crashing is restarted --max-restarts times, then
// given up; the run fails with the work left.
func TestRunMaxRestarts(t *testing.T) {
	t.Parallel()
	tm := newTeam(t, "a")
	code, out, errs := tm.run(context.Background(), args([]string{"run", "-n", "1", "--max-restarts", "2", "--backoff", "20ms"}, short, []string{"--", "sh", "-c", "echo crashing; exit 7"})...)
	if code != 1 || !strings.Contains(errs, "work left") || strings.TrimSpace(out) != "<POWERGLIDE_ERROR>" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	if s, r, g := tm.count("spawn", "1"), tm.count("restart", "1"), tm.count("give_up", "1"); s != 1 || r != 2 || g != 1 {
		tm.dump()
		t.Fatalf("spawn %d, restart %d, give_up %d; want 1, 2, 1", s, r, g)
	}
}

// The team budget stops every worker and the run exits 4.
func TestRunBudget(t *testing.T) {
	t.Parallel()
	tm := newTeam(t, "a")
	tm.env = append(tm.env, "WORKER_COST=0.6")
	// Workers that beat and spend forever.
	loop := `pg-monitor beat --pid $$ --cost-usd 0.6; echo "$$" >> "$POWERGLIDE_HOME/pids"; while :; do sleep 0.2; pg-monitor beat --pid $$; done`
	code, out, errs := tm.run(context.Background(), args([]string{"run", "-n", "2", "--budget-usd", "1"}, short, []string{"--", "sh", "-c", loop})...)
	if code != 4 || !strings.Contains(errs, "budget") {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	if tm.count("budget_stop", "") != 1 {
		tm.dump()
		t.Fatal("no budget_stop event")
	}
	for _, st := range tm.statuses() {
		if alive(st.PID) {
			t.Errorf("worker %s (pid %d) still running after the budget stop", st.Worker, st.PID)
		}
	}
}

// SIGTERM to pg-monitor run stops the workers and releases their tasks.
func TestRunSignal(t *testing.T) {
	t.Parallel()
	tm := newTeam(t, "a", "b")
	loop := `id=$($QUEUE --team $POWERGLIDE_TEAM claim --worker $POWERGLIDE_WORKER | jq -r .id); pg-monitor beat --pid $$ --task "$id"; while :; do sleep 0.2; pg-monitor beat --pid $$; done`
	cmd, out := tm.start(args([]string{"run", "-n", "2"}, short, []string{"--", "sh", "-c", loop})...)
	waitFor(t, "both tasks claimed", 30*time.Second, func() bool { return len(tm.tasks("claimed")) == 2 })
	sts := tm.statuses()
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d (%v), want 143; output:\n%s", code, err, out)
	}
	if n := len(tm.tasks("pending")); n != 2 {
		tm.dump()
		t.Fatalf("%d tasks pending after the stop, want 2", n)
	}
	for _, st := range sts {
		if alive(st.PID) {
			t.Errorf("worker %s (pid %d) still running", st.Worker, st.PID)
		}
	}
}
