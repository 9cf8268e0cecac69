package workermark_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/powerglide/powerglide/pkg/internal/testenv"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/workermark"
)

// sleeper starts a real process (sleep) with attr and returns its pid and
// start time; it is killed and reaped at the end of the test.
func sleeper(t *testing.T, attr *syscall.SysProcAttr) (int, string) {
	t.Helper()
	c := exec.Command("sleep", "60")
	c.SysProcAttr = attr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	start, err := proc.StartTime(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid, start
}

// A mark names one process as one worker of one team: any other team,
// worker, process, host or data root is refused, with the reason.
func TestMakeCheck(t *testing.T) {
	home := t.TempDir()
	pid, start := sleeper(t, nil)
	if err := workermark.Check(home, pid, start, "web", "1", ""); !errors.Is(err, workermark.ErrUnmarked) ||
		!strings.Contains(err.Error(), "carries no worker mark of team web worker 1 in $POWERGLIDE_HOME/run/workers (not started by") {
		t.Fatalf("before any mark: %v", err)
	}
	if err := workermark.Make(home, pid, start, workermark.Mark{Team: "web", Worker: "1", HostID: "h1"}); err != nil {
		t.Fatal(err)
	}
	if err := workermark.Check(home, pid, start, "web", "1", "h1"); err != nil {
		t.Fatalf("marked: %v", err)
	}
	for _, fi := range []string{workermark.Dir(home), filepath.Join(workermark.Dir(home), workermark.Name(pid, start))} {
		st, err := os.Stat(fi)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]os.FileMode{true: 0o700, false: 0o600}[st.IsDir()]; st.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o", fi, st.Mode().Perm(), want)
		}
	}
	for _, c := range []struct {
		home, start, team, worker, host, why string
	}{
		{home, start, "web", "2", "h1", "names team web worker 1"},
		{home, start, "api", "1", "h1", "names team web worker 1"},
		{home, start, "web", "1", "h2", "another host"},
		{home, start + "1", "web", "1", "h1", "not started by"},
		{t.TempDir(), start, "web", "1", "h1", "not started by"},
		{"", start, "web", "1", "h1", "no data root"},
	} {
		err := workermark.Check(c.home, pid, c.start, c.team, c.worker, c.host)
		if !errors.Is(err, workermark.ErrUnmarked) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("check %+v: %v, want a refusal saying %q", c, err, c.why)
		}
	}
	if err := workermark.Remove(home, pid, start); err != nil {
		t.Fatal(err)
	}
	if err := workermark.Check(home, pid, start, "web", "1", "h1"); err == nil {
		t.Fatal("removed mark still accepted")
	}
}

// A mark that is a link, that others may write, or in a directory that
// others may write proves nothing.
func TestCheckRefusesWeakMarks(t *testing.T) {
	pid, start := sleeper(t, nil)
	mk := func(t *testing.T) (string, string) {
		home := t.TempDir()
		if err := workermark.Make(home, pid, start, workermark.Mark{Team: "web", Worker: "1"}); err != nil {
			t.Fatal(err)
		}
		return home, filepath.Join(workermark.Dir(home), workermark.Name(pid, start))
	}
	t.Run("link", func(t *testing.T) {
		home, path := mk(t)
		other := filepath.Join(t.TempDir(), "real")
		if err := os.Rename(path, other); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(other, path); err != nil {
			t.Fatal(err)
		}
		if err := workermark.Check(home, pid, start, "web", "1", ""); err == nil {
			t.Fatal("a link was taken for a mark")
		}
	})
	t.Run("writable", func(t *testing.T) {
		home, path := mk(t)
		if err := os.Chmod(path, 0o622); err != nil {
			t.Fatal(err)
		}
		if err := workermark.Check(home, pid, start, "web", "1", ""); err == nil || !strings.Contains(err.Error(), "other users may write it") {
			t.Fatalf("a mark of mode 0622: %v", err)
		}
	})
	t.Run("dir writable", func(t *testing.T) {
		home, _ := mk(t)
		if err := os.Chmod(workermark.Dir(home), 0o733); err != nil {
			t.Fatal(err)
		}
		if err := workermark.Check(home, pid, start, "web", "1", ""); err == nil || !strings.Contains(err.Error(), "other users may write it") {
			t.Fatalf("a directory of mode 0733: %v", err)
		}
		if err := workermark.Make(home, pid, start, workermark.Mark{Team: "web", Worker: "2"}); err == nil {
			t.Fatal("made a mark in a directory of mode 0733")
		}
	})
	t.Run("not json", func(t *testing.T) {
		home, path := mk(t)
		if err := os.WriteFile(path, []byte("web 1"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := workermark.Check(home, pid, start, "web", "1", ""); err == nil {
			t.Fatal("a mark that is not JSON was accepted")
		}
	})
}

// A mark made by one user never names a process of another: a mark
// file owned by uid 65534 for a process of ours is refused, and so is
// our mark for a process of uid 65534 (which beat would not make).
func TestCheckRefusesOtherUsers(t *testing.T) {
	if os.Getuid() != 0 {
		testenv.Unavailable(t, "running processes and files as another user", errors.New("not root"))
	}
	home := t.TempDir()
	pid, start := sleeper(t, nil)
	if err := workermark.Make(home, pid, start, workermark.Mark{Team: "web", Worker: "1"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(workermark.Dir(home), workermark.Name(pid, start))
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := workermark.Check(home, pid, start, "web", "1", ""); err == nil || !strings.Contains(err.Error(), "made by uid 65534, but the process runs as uid 0") {
		t.Fatalf("a mark of uid 65534 in root's directory, for root's process: %v", err)
	}

	theirs, theirStart := sleeper(t, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}})
	if err := workermark.Make(home, theirs, theirStart, workermark.Mark{Team: "web", Worker: "2"}); err != nil {
		t.Fatal(err)
	}
	if err := workermark.Check(home, theirs, theirStart, "web", "2", ""); err == nil || !strings.Contains(err.Error(), "runs as uid 65534") {
		t.Fatalf("root's mark for a process of uid 65534: %v", err)
	}
}

// Making a mark prunes those of processes that ended or whose pid now
// names another process, and nothing else: not a live process's mark,
// not a name of another form, and a link is removed, never followed.
func TestMakePrunes(t *testing.T) {
	home := t.TempDir()
	live, liveStart := sleeper(t, nil)
	if err := workermark.Make(home, live, liveStart, workermark.Mark{Team: "web", Worker: "1"}); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	gone := c.Process.Pid // reaped: no process has it (or another one does)
	dir := workermark.Dir(home)
	target := filepath.Join(t.TempDir(), "kept")
	if err := os.WriteFile(target, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, link := range map[string]bool{
		workermark.Name(gone, "1"):       false,
		workermark.Name(live, "1"):       false, // the live pid, another start time
		workermark.Name(4194304, "77"):   true,  // a link, to a file that must stay
		"notes":                          false,
		workermark.Name(live, "1") + "x": false,
	} {
		p := filepath.Join(dir, name)
		var err error
		if link {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(`{"team":"web","worker":"9"}`), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	other, otherStart := sleeper(t, nil)
	if err := workermark.Make(home, other, otherStart, workermark.Mark{Team: "web", Worker: "2"}); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	want := []string{workermark.Name(live, liveStart), workermark.Name(other, otherStart), "notes", workermark.Name(live, "1") + "x"}
	if len(names) != len(want) {
		t.Fatalf("after pruning: %v, want %v", names, want)
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(names, " ")+" ", w+" ") {
			t.Fatalf("after pruning: %v, want %v", names, want)
		}
	}
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("the link's target: %v", err)
	}
}

// BenchmarkCheck is the cost a monitor pays before each signal.
func BenchmarkCheck(b *testing.B) {
	home := b.TempDir()
	pid, start, err := proc.Self()
	if err != nil {
		b.Fatal(err)
	}
	if err := workermark.Make(home, pid, start, workermark.Mark{Team: "web", Worker: "1"}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := workermark.Check(home, pid, start, "web", "1", ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMakeAgain is what every pg-monitor beat after the first adds:
// the mark is there already and is only read.
func BenchmarkMakeAgain(b *testing.B) {
	home := b.TempDir()
	pid, start, err := proc.Self()
	if err != nil {
		b.Fatal(err)
	}
	m := workermark.Mark{Team: "web", Worker: "1"}
	if err := workermark.Make(home, pid, start, m); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := workermark.Make(home, pid, start, m); err != nil {
			b.Fatal(err)
		}
	}
}
