package dash_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgdash"
	"github.com/powerglide/powerglide/pkg/dash"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/workermark"
)

// The test binary doubles as pg-dash: tmux runs it with this variable set.
const execEnv = "PG_DASH_TEST_EXEC"

func TestMain(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		os.Exit(cli.Main(pgdash.Spec(), os.Args[1:], cli.Std(os.Stdin, os.Stdout, os.Stderr, os.Environ())))
	}
	os.Exit(m.Run())
}

// tmuxSession is a pg-dash running in a detached tmux session on a private
// server socket.
type tmuxSession struct {
	t      *testing.T
	socket string
}

func (s *tmuxSession) tmux(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-L", s.socket}, args...)...).CombinedOutput()
	return string(out), err
}

func (s *tmuxSession) capture() string {
	out, _ := s.tmux("capture-pane", "-p", "-t", "dash")
	return out
}

func (s *tmuxSession) send(keys ...string) {
	s.t.Helper()
	if out, err := s.tmux(append([]string{"send-keys", "-t", "dash"}, keys...)...); err != nil {
		s.t.Fatalf("send-keys %q: %v %s", keys, err, out)
	}
}

func (s *tmuxSession) sendRaw(seq string) {
	s.t.Helper()
	if out, err := s.tmux("send-keys", "-t", "dash", "-l", seq); err != nil {
		s.t.Fatalf("send-keys -l: %v %s", err, out)
	}
}

// waitScreen waits until the pane shows every marker.
func (s *tmuxSession) waitScreen(markers ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var screen string
	for time.Now().Before(deadline) {
		screen = s.capture()
		ok := true
		for _, m := range markers {
			ok = ok && strings.Contains(screen, m)
		}
		if ok {
			return screen
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("screen never showed %q:\n%s", markers, screen)
	return ""
}

// liveTeam writes a small team whose clocks are now, with worker 1 a real
// process group that x can stop.
func liveTeam(t *testing.T) (teamdir.Dir, *exec.Cmd, chan error) {
	t.Helper()
	d, err := teamdir.New(t.TempDir(), "live")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ensure(); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "120")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	t.Cleanup(func() { sleeper.Process.Kill() })
	start, err := proc.StartTime(sleeper.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	now := time.Now().UTC()
	writeQueue(t, d, now, 3)
	for i := 1; i <= 3; i++ {
		w := map[string]any{
			"worker": fmt.Sprint(i), "pid": 0, "pid_start": "", "host": host, "epoch": 1,
			"state": "thinking", "task": fmt.Sprintf("t-%d", i), "step": i,
			"heartbeat_at": now, "progress_at": now, "started_at": now.Add(-time.Minute),
			"usage":    map[string]any{"input_tokens": 1000 * i, "output_tokens": 100 * i, "cost_usd": 0.01 * float64(i)},
			"velocity": 1, "last_error": nil,
		}
		if i == 1 {
			w["pid"], w["pid_start"] = sleeper.Process.Pid, start
			if err := workermark.Make(d.Home, sleeper.Process.Pid, start, workermark.Mark{Team: d.Team, Worker: "1"}); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := json.Marshal(w)
		if err := atomicfile.WriteFile(d.Worker(fmt.Sprint(i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	appendLine(t, d.Log("1"), map[string]any{"type": "state", "ts": now, "worker": "1", "step": 1, "from": "pick_task", "to": "thinking"})
	appendLine(t, d.Events(), map[string]any{"type": "monitor", "ts": now.Add(-time.Minute), "action": "spawn", "reason": "e2e"})
	return d, sleeper, done
}

func writeQueue(t *testing.T, d teamdir.Dir, now time.Time, n int) {
	t.Helper()
	var tasks []map[string]any
	for i := 1; i <= n; i++ {
		status := "claimed"
		title := fmt.Sprintf("live task number %d", i)
		if i > 3 {
			status, title = "pending", "brand new task"
		}
		tasks = append(tasks, map[string]any{"id": fmt.Sprintf("t-%d", i), "title": title, "status": status,
			"priority": 0, "depends_on": []string{}, "labels": map[string]string{}, "attempts": 1, "max_attempts": 3,
			"claim": nil, "result": nil, "error": nil, "created_at": now, "updated_at": now})
	}
	b, _ := json.Marshal(map[string]any{"tasks": tasks})
	if err := atomicfile.WriteFile(d.Queue(), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendLine(t *testing.T, path string, rec any) {
	t.Helper()
	b, _ := json.Marshal(rec)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// TestTmux runs pg-dash in a real terminal (tmux, 120x40) against a team
// whose files change while it runs, and drives it with keys.
func TestTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		if testing.Short() {
			t.Skip("tmux not installed")
		}
		t.Fatal("tmux is not installed: scripts/test-deps.sh installs it")
	}
	d, _, sleeperDone := liveTeam(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := &tmuxSession{t: t, socket: fmt.Sprintf("pgdash-e2e-%d", os.Getpid())}
	t.Cleanup(func() { s.tmux("kill-server") })
	cmdline := fmt.Sprintf("env %s=1 POWERGLIDE_HOME=%s TERM=xterm-256color %s --team live --stale 3s; echo pg-dash exited $?; sleep 30",
		execEnv, d.Home, self)
	if out, err := s.tmux("new-session", "-d", "-s", "dash", "-x", "120", "-y", "40", cmdline); err != nil {
		t.Fatalf("tmux new-session: %v %s", err, out)
	}
	s.waitScreen("team live", "live task number 3", "monitor spawn")

	// The files change while it runs: a worker changes state, a task is
	// added, a heartbeat goes stale.
	w2, _ := d.ReadWorker("2")
	w2.State, w2.Step = "verify", 7
	w2.HeartbeatAt = time.Now().UTC()
	if err := d.WriteWorker(w2); err != nil {
		t.Fatal(err)
	}
	writeQueue(t, d, time.Now().UTC(), 4)
	s.waitScreen("2  verify", "of 4")
	// Worker 3 never beats again: once its beat is more than --stale 3s
	// old, it reads stale in the JSON view of the same files, and not
	// before.
	w3, err := d.ReadWorker("3")
	if err != nil {
		t.Fatal(err)
	}
	for ; ; time.Sleep(100 * time.Millisecond) {
		asked := time.Now()
		rec := onceJSON(t, d)
		if !rec.Workers[2].Stale {
			if age := asked.Sub(w3.HeartbeatAt); age > 4*time.Second {
				t.Errorf("worker 3 not stale %s after its last beat: %+v", age, rec.Workers[2])
				break
			}
			continue
		}
		if age := time.Since(w3.HeartbeatAt); age <= 3*time.Second {
			t.Errorf("worker 3 stale %s after its last beat, before --stale 3s", age)
		}
		break
	}

	// Worker 1's log streams in the worker view.
	s.send("Enter")
	s.waitScreen("worker 1", "pick_task → thinking")
	for i := 0; i < 40; i++ {
		appendLine(t, d.Log("1"), map[string]any{"type": "log", "ts": time.Now().UTC(), "level": "info", "message": fmt.Sprintf("e2e line %02d", i)})
	}
	s.waitScreen("e2e line 39", "41 events · following")
	// The mouse wheel scrolls back (SGR wheel-up reports).
	for i := 0; i < 3; i++ {
		s.sendRaw("\x1b[<64;20;20M")
	}
	screen := s.waitScreen("lines (G to follow)")
	if strings.Contains(screen, "e2e line 39") {
		t.Errorf("scrolled view still shows the last line:\n%s", screen)
	}
	s.send("G")
	s.waitScreen("41 events · following", "e2e line 39")

	// p pauses worker 1 through its velocity file.
	s.send("p")
	s.waitScreen("worker 1 paused (velocity 0)")
	if b, _ := os.ReadFile(d.Velocity("1")); string(b) != "0\n" {
		t.Errorf("velocity file holds %q", b)
	}

	// Tasks: filter by text, open the new task.
	s.send("Tab")
	s.waitScreen("tasks · 4 of 4")
	s.send("/")
	s.send("-l", "brand")
	s.send("Enter")
	s.waitScreen("tasks · 1 of 4 · filter brand")
	s.send("Enter")
	s.waitScreen("task t-4", "brand new task")
	s.send("Escape")
	// (An Esc followed at once by another key reads as alt+key.)
	s.waitScreen("tasks · 1 of 4 · filter brand")

	// x stops worker 1 (a real process group) after confirmation.
	s.send("Tab")
	s.waitScreen("team live", "2  verify")
	s.send("x")
	s.waitScreen("Stop worker 1 (SIGTERM to process group")
	s.send("y")
	s.waitScreen("sent SIGTERM to worker 1")
	select {
	case <-sleeperDone:
	case <-time.After(30 * time.Second):
		t.Fatal("worker 1's process was not stopped 30 s after the SIGTERM")
	}
	s.waitScreen("1  dead")

	s.send("q")
	s.waitScreen("pg-dash exited 0")
}

func onceJSON(t *testing.T, d teamdir.Dir) dash.SnapshotRecord {
	t.Helper()
	var out, errb strings.Builder
	code := cli.Run(context.Background(), pgdash.Spec(), []string{"--team", d.Team, "--once", "--json", "--stale", "3s"},
		cli.Test(nil, &out, &errb, "POWERGLIDE_HOME="+d.Home, "HOME="+filepath.Dir(d.Home)))
	if code != 0 {
		t.Fatalf("pg-dash --once: exit %d: %s", code, errb.String())
	}
	var rec dash.SnapshotRecord
	if err := json.Unmarshal([]byte(out.String()), &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}
