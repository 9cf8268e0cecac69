package monitor

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/internal/testenv"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store/filestore"
)

// Two hosts with one name (cloned machines, containers on the host's
// network): records carry the host's id, and a watcher checks and signals
// only the pids of records with its own. A live worker of the other host
// whose pid is gone here is not dead, and one whose pid here is a live
// process of this host with the very start time is never signalled.
func TestPassSameNameOtherHost(t *testing.T) {
	w, q := newWatcher(t)
	other := proc.HostID("another boot", "pid:[4026531836]")
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	pid, start, _ := sleeper(t, "echo ready; exec sleep 1000")
	now := time.Now()
	for _, r := range []*protocol.Worker{
		// alive there; its pid names no process here
		{Worker: "1", PID: gone.Process.Pid, PIDStart: "1", Host: w.Host.Name, HostID: other, State: "executing", Task: "a",
			HeartbeatAt: now, ProgressAt: now, StartedAt: now, Velocity: 1},
		// stale there; its pid and start time are those of a process here
		{Worker: "2", PID: pid, PIDStart: start, Host: w.Host.Name, HostID: other, State: "executing", Task: "b",
			HeartbeatAt: now.Add(-time.Hour), ProgressAt: now.Add(-time.Hour), StartedAt: now.Add(-time.Hour), Velocity: 1},
	} {
		if err := w.Dir.WriteWorker(r); err != nil {
			t.Fatal(err)
		}
		q.claim(r.Task, r.Worker)
	}
	for range 2 {
		res := pass(t, w)
		if got := actions(res); got != "" {
			t.Fatalf("acted on another host's workers: %q", got)
		}
		want := map[string]Liveness{"1": Alive, "2": Stale}
		for _, s := range res.Workers {
			if Liveness(s.Liveness) != want[s.Worker] {
				t.Errorf("worker %s: %s (%s), want %s", s.Worker, s.Liveness, s.Reason, want[s.Worker])
			}
		}
	}
	if len(q.releases) != 0 {
		t.Fatalf("released %v", q.releases)
	}
	if !proc.Matches(pid, start) {
		t.Fatal("the other host's pid was signalled")
	}
}

// The reviewer's case, with real parts: a worker in a pid namespace of its
// own (another container of this machine, as far as pids go) under this
// host's name beats through monitor.Beat, as `pg-monitor beat` does, and
// holds a claim. Its pid means nothing in this namespace: a watch pass
// here must neither declare it dead nor release its task.
func TestPassWorkerInOtherPIDNamespace(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err == nil {
		err = exec.Command(unshare, "--pid", "--fork", "--mount-proc", "true").Run()
	}
	if err != nil {
		testenv.Unavailable(t, "no PID namespace (unshare --pid --fork --mount-proc)", err)
	}
	w, q := newWatcher(t)
	w.Opts.Heartbeat = time.Minute // a race-built beat takes a while
	// In the namespace: a worker (sleep) and this test binary beating
	// for it, then waiting with it.
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "--kill-child", "sh", "-c",
		`sleep 600 & `+envBeatPID+`=$! "$0" -test.run='^TestHelperBeat$' -test.count=1 || exit 1; echo ready; wait`, os.Args[0])
	cmd.Env = append(os.Environ(), envBeatHome+"="+w.Dir.Home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	var lines []string
	for sc.Scan() && sc.Text() != "ready" {
		lines = append(lines, sc.Text())
	}
	rec, err := w.team().Workers().Read(context.Background(), "1")
	if err != nil {
		t.Fatalf("no record from the namespace: %v\n%s\n%s", err, strings.Join(lines, "\n"), stderr.String())
	}
	if rec.Host != w.Host.Name || rec.HostID == "" || rec.HostID == w.Host.ID {
		t.Fatalf("record of the namespace: host %q id %q, want host %q and an id other than %q", rec.Host, rec.HostID, w.Host.Name, w.Host.ID)
	}
	q.claim("a", "1")
	res := pass(t, w)
	if got := actions(res); got != "" {
		t.Fatalf("acted on the other namespace's worker (pid %d there): %q", rec.PID, got)
	}
	if len(res.Workers) != 1 || res.Workers[0].Liveness != string(Alive) {
		t.Fatalf("statuses %+v, want worker 1 alive", res.Workers)
	}
	if len(q.releases) != 0 {
		t.Fatalf("released %v", q.releases)
	}
}

const (
	envBeatHome = "POWERGLIDE_TEST_BEAT_HOME"
	envBeatPID  = "POWERGLIDE_TEST_BEAT_PID"
)

// TestHelperBeat is TestPassWorkerInOtherPIDNamespace's worker side: run
// by it with the team's home and the worker's pid, it beats for worker 1
// of team t. Otherwise it does nothing.
func TestHelperBeat(t *testing.T) {
	home := os.Getenv(envBeatHome)
	if home == "" {
		return
	}
	pid, err := strconv.Atoi(os.Getenv(envBeatPID))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := filestore.Open(home, filestore.Options{}).Team("t")
	if err != nil {
		t.Fatal(err)
	}
	state, task := "executing", "a"
	if _, err := Beat(context.Background(), tm, BeatOptions{Worker: "1", PID: pid, Home: home, Host: proc.ThisHost(), State: &state, Task: &task}); err != nil {
		t.Fatal(err)
	}
}
