package pgmonitor_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
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
			// past the limit (never earlier), and within the limit plus one
			// interval, plus the pass itself and generous slack for a
			// loaded machine.
			age := heartbeatAge(t, ev.Reason)
			if age < 3*time.Second || age > 3*time.Second+200*time.Millisecond+10*time.Second {
				t.Errorf("stopped with the last heartbeat %s old, want between the limit 3s and 3s + interval 200ms (+10s slack): %s", age, ev.Reason)
			}
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

// Restarts wait the backoff, doubled for each further restart. Only lower
// bounds are checked: a loaded machine may be late, never early.
func TestRunBackoffDoubles(t *testing.T) {
	t.Parallel()
	tm := newTeam(t, "a")
	code, out, errs := tm.run(context.Background(), args([]string{"run", "-n", "1", "--max-restarts", "3", "--backoff", "200ms"}, short, []string{"--", "sh", "-c", "exit 1"})...)
	if code != 1 {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	exits := tm.workerEvents("exit")
	var restarts []time.Time
	for _, ev := range tm.events() {
		if ev.Action == "restart" {
			restarts = append(restarts, ev.TS)
		}
	}
	if len(exits) != 4 || len(restarts) != 3 {
		tm.dump()
		t.Fatalf("%d exits and %d restarts, want 4 and 3", len(exits), len(restarts))
	}
	want := 200 * time.Millisecond
	for i, r := range restarts {
		if gap := r.Sub(exits[i].TS); gap < want {
			tm.dump()
			t.Errorf("restart %d came %s after the exit, want at least %s", i+1, gap, want)
		}
		want *= 2
	}
}

// heartbeatAge reads the heartbeat's age from a stale worker's sigterm
// reason ("stale: last heartbeat 3.21s ago, limit 3s").
func heartbeatAge(t *testing.T, reason string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`last heartbeat (\S+) ago`).FindStringSubmatch(reason)
	if m == nil {
		t.Fatalf("no heartbeat age in %q", reason)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("heartbeat age in %q: %v", reason, err)
	}
	return d
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

// SIGTERM or SIGINT (Ctrl-C) to pg-monitor run stops the workers and
// releases their tasks; it exits 128+n.
func TestRunSignal(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			testRunSignal(t, sig)
		})
	}
}

func testRunSignal(t *testing.T, sig syscall.Signal) {
	tm := newTeam(t, "a", "b")
	loop := `id=$($QUEUE --team $POWERGLIDE_TEAM claim --worker $POWERGLIDE_WORKER | jq -r .id); pg-monitor beat --pid $$ --task "$id"; while :; do sleep 0.2; pg-monitor beat --pid $$; done`
	cmd, out := tm.start(args([]string{"run", "-n", "2"}, short, []string{"--", "sh", "-c", loop})...)
	waitFor(t, "both tasks claimed", 30*time.Second, func() bool { return len(tm.tasks("claimed")) == 2 })
	sts := tm.statuses()
	cmd.Process.Signal(sig)
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 128+int(sig) {
		t.Fatalf("exit %d (%v), want %d; output:\n%s", code, err, 128+int(sig), out)
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

// A line that only quotes the marker (an event holding it in its text) is
// not <POWERGLIDE_DONE>: the worker that prints it and crashes is
// restarted. The marker alone on a line, spaces around it, is.
func TestRunMarkerMustBeTheLine(t *testing.T) {
	t.Parallel()
	tm := newTeam(t, "a")
	quoted := `echo '{"type":"assistant","text":"I will print <POWERGLIDE_DONE> when done"}'; exit 1`
	code, out, errs := tm.run(context.Background(), args([]string{"run", "-n", "1", "--max-restarts", "1", "--backoff", "20ms"}, short, []string{"--", "sh", "-c", quoted})...)
	if code != 1 || strings.TrimSpace(out) != "<POWERGLIDE_ERROR>" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	if r, g := tm.count("restart", "1"), tm.count("give_up", "1"); r != 1 || g != 1 {
		tm.dump()
		t.Fatalf("restart %d, give_up %d; want 1, 1: a quoted marker is not the marker", r, g)
	}
	tm2 := newTeam(t, "a")
	code, _, errs = tm2.run(context.Background(), args([]string{"run", "-n", "1", "--max-restarts", "1", "--backoff", "20ms"}, short, []string{"--", "sh", "-c", `echo '  <POWERGLIDE_DONE> '; exit 1`})...)
	if code != 1 || tm2.count("restart", "1") != 0 {
		tm2.dump()
		t.Fatalf("exit %d, %d restarts after the marker line; stderr:\n%s", code, tm2.count("restart", "1"), errs)
	}
}

// --restart on-failure restarts a worker that ended with
// <POWERGLIDE_ERROR> (the error may heal), but not one whose exit says a
// restart cannot help: exit status 2 or 4, or an unrecoverable error.
func TestRunRestartAfterError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		script   string
		restarts int
		reason   string // of the give_up event
	}{
		{"error may heal", `echo '<POWERGLIDE_ERROR>'; exit 1`, 1, "restarted 1 times"},
		{"crash", `exit 1`, 1, "restarted 1 times"},
		{"usage error", `echo 'pg-loop: error: --lease must be positive' >&2; exit 2`, 0, "exit status 2 is a usage error"},
		{"limit", `echo '<POWERGLIDE_ERROR>'; echo 'pg-loop: error: budget: $1.00 spent' >&2; exit 4`, 0, "exit status 4 means a limit"},
		{"unrecoverable", `echo '<POWERGLIDE_ERROR>'; echo 'pg-loop: error: unrecoverable: model: 401 invalid x-api-key' >&2; echo >&2; exit 1`, 0, "unrecoverable: pg-loop: error: unrecoverable: model: 401"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tm := newTeam(t, "a")
			// An earlier process's stderr must not decide for this one.
			os.MkdirAll(filepath.Join(tm.dir.Path(), "logs"), 0o755)
			os.WriteFile(tm.dir.Log("1")+".stderr", []byte("pg-loop: error: unrecoverable: from yesterday\n"), 0o644)
			code, out, errs := tm.run(context.Background(), args([]string{"run", "-n", "1", "--max-restarts", "1", "--backoff", "20ms"}, short, []string{"--", "sh", "-c", c.script})...)
			if code != 1 || strings.TrimSpace(out) != "<POWERGLIDE_ERROR>" {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errs)
			}
			r := tm.count("restart", "1")
			var reason string
			for _, ev := range tm.events() {
				if ev.Action == "give_up" {
					reason = ev.Reason
				}
			}
			if r != c.restarts || !strings.Contains(reason, c.reason) {
				tm.dump()
				t.Fatalf("%d restarts, give_up %q; want %d restarts and a give_up saying %q", r, reason, c.restarts, c.reason)
			}
		})
	}
	// --restart always restarts even those.
	tm := newTeam(t, "a")
	code, _, errs := tm.run(context.Background(), args([]string{"run", "-n", "1", "--restart", "always", "--max-restarts", "1", "--backoff", "20ms"}, short, []string{"--", "sh", "-c", "exit 4"})...)
	if code != 1 || tm.count("restart", "1") != 1 {
		tm.dump()
		t.Fatalf("--restart always: exit %d, %d restarts, want 1; stderr:\n%s", code, tm.count("restart", "1"), errs)
	}
}

// What a worker's earlier processes spent stays in the team's total: the
// restarted worker's record carries it in spent, each exit event records
// its process's usage, and a later pg-monitor run counts it in the budget.
func TestRunSpendingSurvivesRestarts(t *testing.T) {
	t.Parallel()
	tm := newTeam(t, "a")
	crash := `pg-monitor beat --pid $$ --cost-usd 0.4; exit 1`
	code, _, errs := tm.run(context.Background(), args([]string{"run", "-n", "1", "--max-restarts", "1", "--backoff", "20ms"}, short, []string{"--", "sh", "-c", crash})...)
	if code != 1 {
		t.Fatalf("exit %d; stderr:\n%s", code, errs)
	}
	w, err := tm.dir.ReadWorker("1")
	if err != nil {
		t.Fatal(err)
	}
	if w.Spent == nil || !near(w.Spent.CostUSD, 0.4) || !near(w.Usage.CostUSD, 0.4) {
		tm.dump()
		t.Fatalf("worker record after a restart: spent %+v, usage %+v; want 0.4 each", w.Spent, w.Usage)
	}
	b, _ := os.ReadFile(tm.dir.Events())
	if n := strings.Count(string(b), `"op":"exit"`); n != 2 || strings.Count(string(b), `"cost_usd":0.4}`) != 2 {
		tm.dump()
		t.Fatalf("want 2 exit events, each with the process's usage ($0.4); got %d", n)
	}
	// pg-monitor restarted: the team has spent 0.8 already, and one more
	// process's 0.4 reaches the budget of 1.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spend := `pg-monitor beat --pid $$ --cost-usd 0.4; while :; do sleep 0.2; pg-monitor beat --pid $$; done`
	code, _, errs = tm.run(ctx, args([]string{"run", "-n", "1", "--budget-usd", "1"}, short, []string{"--", "sh", "-c", spend})...)
	if code != 4 || !strings.Contains(errs, "spent $1.2000 of $1.0000") {
		tm.dump()
		t.Fatalf("exit %d, want 4 with $1.2 spent; stderr:\n%s", code, errs)
	}
	// A team that spent its budget starts no worker.
	spawns := tm.count("spawn", "")
	code, _, errs = tm.run(ctx, args([]string{"run", "-n", "1", "--budget-usd", "1"}, short, []string{"--", "sh", "-c", spend})...)
	if code != 4 || !strings.Contains(errs, "no worker started") || tm.count("spawn", "") != spawns {
		tm.dump()
		t.Fatalf("exit %d, %d new spawns; want 4 and none; stderr:\n%s", code, tm.count("spawn", "")-spawns, errs)
	}
	// status shows what the earlier processes spent.
	code, out, _ := tm.run(context.Background(), "status", "--jq", `select(.type == "worker_status") | .spent.cost_usd + .usage.cost_usd`)
	if code != 0 || strings.TrimSpace(out) != "1.2000000000000002" && strings.TrimSpace(out) != "1.2" {
		t.Fatalf("status: exit %d:\n%s", code, out)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
