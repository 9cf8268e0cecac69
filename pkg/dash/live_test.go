package dash

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/workermark"
)

// TestLiveChanges changes a team's files under a running dashboard, with
// file notifications and with polling.
func TestLiveChanges(t *testing.T) {
	for _, poll := range []bool{false, true} {
		name := "fsnotify"
		if poll {
			name = "poll"
		}
		t.Run(name, func(t *testing.T) {
			d := fixtureDir(t)
			h := startHarness(t, Options{Dir: d, Poll: poll, Refresh: 50 * time.Millisecond, View: ViewWorker}, 100, 30)
			h.waitFor("one more check")

			// The fixture's log ends inside a line: its writer finishes it,
			// then new events arrive.
			appendFile(t, d.Log("1"), `el":"info","message":"a line finished late"}`+"\n")
			h.waitFor("a line finished late")
			appendFile(t, d.Log("1"), `{"type":"tool_result","ts":"2026-11-22T09:59:59Z","step":17,"result":{"type":"result","id":"c17","name":"bash","ok":true,"output":"ok  github.com/powerglide/powerglide/pkg/queue 9.1s","duration_ms":9100}}`+"\n")
			h.waitFor("◀ bash ok 9.1s", "pkg/queue 9.1s")

			// An invalid line is counted and skipped.
			appendFile(t, d.Log("1"), "{oops\n")
			h.waitFor("3 problems", "invalid line skipped")

			// The worker record changes (atomic replace).
			w, err := d.ReadWorker("1")
			if err != nil {
				t.Fatal(err)
			}
			w.State, w.Step = "verify", 18
			if err := d.WriteWorker(w); err != nil {
				t.Fatal(err)
			}
			h.waitFor("worker 1  verify", "step 18")

			// The log is rotated: the new file is read from its start.
			if err := os.Rename(d.Log("1"), d.Log("1")+".1"); err != nil {
				t.Fatal(err)
			}
			appendFile(t, d.Log("1"), `{"type":"log","ts":"2026-11-22T10:00:00Z","level":"info","message":"fresh log"}`+"\n")
			h.waitFor("log rotated", "fresh log")

			// The log is truncated in place.
			if err := os.WriteFile(d.Log("1"), []byte(`{"type":"log","ts":"2026-11-22T10:00:01Z","level":"info","message":"after truncation"}`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			h.waitFor("log truncated", "after truncation")

			// A new worker appears; the queue goes away.
			w.Worker, w.PID, w.State, w.Task = "7", 40004, "thinking", "t-09"
			if err := d.WriteWorker(w); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(d.Queue()); err != nil {
				t.Fatal(err)
			}
			h.keys("esc")
			h.waitFor("no task-queue.json yet", "  7  thinking")

			// A broken queue is a warning, and the rest still shows.
			if err := os.WriteFile(d.Queue(), []byte(`{"tasks":[{"id":`), 0o644); err != nil {
				t.Fatal(err)
			}
			h.waitFor("task-queue.json: queue document", "  7  thinking")
		})
	}
}

// TestTeamRemoved: the team directory goes and comes back; the dashboard
// polls once notifications stop.
func TestTeamRemoved(t *testing.T) {
	d := fixtureDir(t)
	h := startHarness(t, Options{Dir: d, Refresh: 50 * time.Millisecond}, 100, 30)
	h.waitFor("retry-after")
	if err := os.RemoveAll(d.Path()); err != nil {
		t.Fatal(err)
	}
	h.waitFor("no team directory yet")
	if err := d.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteWorker(&protocol.Worker{Worker: "1", State: "commit", HeartbeatAt: fixtureNow}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("no task-queue.json yet", "1  commit")
}

// TestTeamAppears starts on a team that does not exist yet.
func TestTeamAppears(t *testing.T) {
	home := t.TempDir()
	d, _ := teamdir.New(home, "later")
	h := startHarness(t, Options{Dir: d, Refresh: 50 * time.Millisecond}, 80, 24)
	h.waitFor("no team directory yet", "no workers yet")
	if err := d.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteWorker(&protocol.Worker{Worker: "1", State: "thinking", HeartbeatAt: fixtureNow}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("no task-queue.json yet", "1  thinking")
	// Now watched (or polled): later changes show too.
	if err := d.WriteWorker(&protocol.Worker{Worker: "1", State: "commit", HeartbeatAt: fixtureNow}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("1  commit")
}

func waitFile(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if got = string(b); got == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s holds %q, want %q", path, got, want)
}

// TestVelocityKeys: p pauses and resumes, + and - step the velocity file.
func TestVelocityKeys(t *testing.T) {
	d := fixtureDir(t)
	h := startHarness(t, Options{Dir: d}, 100, 30)
	h.waitFor("retry-after")
	h.keys("p")
	waitFile(t, d.Velocity("1"), "0\n")
	h.waitFor("worker 1 paused (velocity 0)", "▸ 1  paused")
	h.keys("p")
	waitFile(t, d.Velocity("1"), "1\n")
	h.waitFor("worker 1 velocity 1", "▸ 1  executing")
	h.keys("+")
	waitFile(t, d.Velocity("1"), "2\n")
	h.waitFor("worker 1 velocity 2")

	// Worker 2 runs at 0.5 from its file: - then p twice comes back to it.
	h.keys("down", "-")
	waitFile(t, d.Velocity("2"), "0.25\n")
	h.waitFor("worker 2 velocity 0.25")
	h.keys("p")
	waitFile(t, d.Velocity("2"), "0\n")
	h.waitFor("worker 2 paused")
	h.keys("p")
	waitFile(t, d.Velocity("2"), "0.25\n")

	// Worker 3 was paused before the dashboard started: p resumes it at
	// the record's velocity.
	h.keys("down")
	h.waitFor("▸ 3  paused")
	h.keys("p")
	waitFile(t, d.Velocity("3"), "1\n")
	h.waitFor("▸ 3  observing")
}

// TestStopWorker stops a real process group after confirmation, and
// refuses a pid whose start time does not match.
func TestStopWorker(t *testing.T) {
	d := fixtureDir(t)
	cmd, start, done := liveWorker(t, d, "1")
	// Worker 2 names the same pid with another start time: a reused pid.
	w2, _ := d.ReadWorker("2")
	w2.PID, w2.PIDStart, w2.Host = cmd.Process.Pid, start+"1", "this-host"
	if err := d.WriteWorker(w2); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "60")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	otherDone := make(chan error, 1)
	go func() { otherDone <- other.Wait() }()
	t.Cleanup(func() { other.Process.Kill() })
	otherStart, err := proc.StartTime(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	w4, _ := d.ReadWorker("4")
	w4.PID, w4.PIDStart, w4.Host = other.Process.Pid, otherStart, "this-host"
	if err := d.WriteWorker(w4); err != nil {
		t.Fatal(err)
	}
	h := startHarness(t, Options{Dir: d, Host: proc.Host{Name: "this-host"}, Alive: proc.Matches}, 100, 30)
	// Two hosts: the table has a HOST column.
	h.waitFor("retry-after", "▸ 1  this-host    executing", "  3  fixture-host paused")

	// Any key but y cancels.
	h.keys("x")
	h.waitFor("Stop worker 1 (SIGTERM to process group")
	h.keys("n")
	h.waitFor("not stopped")
	select {
	case err := <-done:
		t.Fatalf("process ended: %v", err)
	case <-time.After(100 * time.Millisecond):
	}

	// The reused pid is never signalled.
	h.keys("down", "x")
	h.waitFor("worker 2: process " + strconv.Itoa(cmd.Process.Pid) + " has ended or its pid was reused: nothing to stop")
	select {
	case err := <-done:
		t.Fatalf("a pid with another start time was signalled: %v", err)
	case <-time.After(100 * time.Millisecond):
	}

	// Worker 3 runs on another host: refused without asking.
	h.keys("down", "x")
	h.waitFor(`worker 3 runs on host "fixture-host": stop it there`)

	// Worker 4's record names a live process of this user that carries
	// no worker mark (hostile3 F1: anyone who can write a record can name
	// any pid): refused without asking, and it runs on.
	h.keys("down", "x")
	h.waitFor("not signalled: pid " + strconv.Itoa(other.Process.Pid) + " carries no worker mark of team demo worker 4")
	select {
	case err := <-otherDone:
		t.Fatalf("the unmarked process ended: %v", err)
	case <-time.After(100 * time.Millisecond):
	}

	h.keys("up", "up", "up", "x")
	h.waitFor("Stop worker 1")
	h.keys("y")
	h.waitFor("sent SIGTERM to worker 1")
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Fatalf("process ended with %v, want SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("process not stopped 30 s after the SIGTERM")
	}
	h.waitFor("▸ 1  this-host    dead")
	// The stop is in the team's journal, with who asked for it (the
	// refused ones are not).
	b, _ := os.ReadFile(d.Events())
	if n := strings.Count(string(b), `"op":"stop"`); n != 1 ||
		!regexp.MustCompile(`"worker":"1","op":"stop","pid":`+strconv.Itoa(cmd.Process.Pid)+`,"reason":"pg-dash: SIGTERM`).Match(b) {
		t.Fatalf("%d stop events in events.jsonl, want one for worker 1 by pg-dash:\n%s", n, b)
	}
	h.waitFor("worker 1 stop: pg-dash: SIGTERM")
}

// liveWorker makes worker name of team d a real process (sleep, in a
// process group of its own) that carries its worker mark, as one started
// by pg-loop or pg-monitor beat does. done says how it ended.
func liveWorker(t *testing.T, d teamdir.Dir, name string) (*exec.Cmd, string, <-chan error) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	start, err := proc.StartTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := workermark.Make(d.Home, cmd.Process.Pid, start, workermark.Mark{Team: d.Team, Worker: name}); err != nil {
		t.Fatal(err)
	}
	w, _ := d.ReadWorker(name)
	w.PID, w.PIDStart, w.Host = cmd.Process.Pid, start, "this-host"
	if err := d.WriteWorker(w); err != nil {
		t.Fatal(err)
	}
	return cmd, start, done
}

// TestCtrlCInFilter: Ctrl-C quits while the filter (which takes q as
// text) or a confirmation is open.
func TestCtrlCInFilter(t *testing.T) {
	for _, keys := range [][]string{{"tab", "tab", "/", "q"}, {"x"}} {
		d := fixtureDir(t)
		liveWorker(t, d, "1") // x asks to confirm only for a worker it may stop
		h := startHarness(t, Options{Dir: d, Host: proc.Host{Name: "this-host"}}, 80, 24)
		h.waitFor("retry-after")
		h.keys(keys...)
		if keys[0] == "x" {
			h.waitFor("Stop worker 1")
		} else {
			h.waitFor("/q")
		}
		h.tm.Send(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl})
		h.tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	}
}

// TestWarningsExpire: invalid lines are shown on the warning line for a
// while after the last one, not for the rest of the session.
func TestWarningsExpire(t *testing.T) {
	var mu sync.Mutex
	now := fixtureNow
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	m := New(Options{Dir: fixtureDir(t), Now: clock})
	m.warnLine("events.jsonl", "invalid record: one")
	m.warnLine("events.jsonl", "invalid record: two")
	if got := ansi.Strip(m.warningLine(200)); !strings.Contains(got, "2 problems, last: invalid record: two") {
		t.Fatalf("warning line %q", got)
	}
	mu.Lock()
	now = now.Add(warnTTL + time.Second)
	mu.Unlock()
	m.Update(clockMsg{})
	if got := m.warningLine(200); got != "" {
		t.Fatalf("warning still shown %s after the last invalid line: %q", warnTTL, ansi.Strip(got))
	}
	m.warnLine("events.jsonl", "invalid record: three")
	if got := ansi.Strip(m.warningLine(200)); !strings.Contains(got, "events.jsonl: invalid record: three") || strings.Contains(got, "problems") {
		t.Fatalf("a new warning after the old ones expired: %q", got)
	}
}

// TestStreamControlsRefused: a stream has no files to pause or stop.
func TestStreamControlsRefused(t *testing.T) {
	r, w, _ := os.Pipe()
	defer w.Close()
	h := startHarness(t, Options{Stream: r}, 80, 24)
	w.WriteString(`{"type":"state","ts":"2026-11-22T09:59:00Z","worker":"3","step":1,"from":"pick_task","to":"thinking"}` + "\n")
	h.waitFor("worker 3", "thinking")
	h.keys("p")
	h.waitFor("nothing to control")
	w.WriteString(`{"type":"assistant","ts":"2026-11-22T09:59:30Z","step":1,"text":"partial line arrives`)
	time.Sleep(50 * time.Millisecond)
	w.WriteString(" whole\"," + `"usage":{},"total":{"input_tokens":1000,"output_tokens":500}}` + "\n")
	h.waitFor("partial line arrives whole", "tokens 1.5k")
	w.Close()
	h.waitFor("the stream ended", "(ended)")
	if strings.Contains(h.frame(), "problems") {
		t.Fatal("a line split across writes was reported invalid")
	}
}
