package agent_test

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/powerglide/powerglide/pkg/store/agent"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// An agent that starts, and one that exits, removes the files that the
// agents of other stores, builds and hosts left in the run directory once
// they no longer run: a socket no one listens on at once; the start lock,
// the log and the .failed note once the log is a day old, so that the
// log of a start that failed today stays to be read. It never touches the
// files of an agent that runs (its socket answers, its log is locked) or
// that a command is starting (its start lock is held), nor anything not of
// the agents' exact names, not of their type, or a link.
func TestPruneRunDir(t *testing.T) {
	home := withHome(t, 300*time.Millisecond)
	dir := agent.RunDir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-agent.KeepLogs - time.Hour)
	file := func(name string, mtime time.Time) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return name
	}
	deadSocket := func(name string, mtime time.Time) string {
		t.Helper()
		path := filepath.Join(dir, name)
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false)
		ln.Close() // what a SIGKILLed agent leaves
		os.Chtimes(path, mtime, mtime)
		return name
	}
	const (
		gone    = "store-aaaaaaaaaaaaaaaa" // stopped a day ago and more
		failed  = "store-bbbbbbbbbbbbbbbb" // failed to start an hour ago
		holding = "store-cccccccccccccccc" // a command is starting it
		living  = "store-9999999999999999" // runs (its log is locked), its socket away
	)
	// A live agent of another store, its log a day old, and one of an
	// earlier version (its socket answers; it locks nothing).
	other := mustOpen(t, options("file:"+t.TempDir()))
	logs := mustGlob(t, dir, "store-*.log")
	if len(logs) != 1 {
		t.Fatalf("logs %v, want the other agent's", logs)
	}
	otherBase := strings.TrimSuffix(logs[0], ".log")
	os.Chtimes(filepath.Join(dir, logs[0]), old, old)
	earlier := filepath.Join(dir, "store-dddddddddddddddd.sock")
	eln, err := net.ListenUnix("unix", &net.UnixAddr{Name: earlier, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer eln.Close()
	file("store-dddddddddddddddd.log", old)

	wantGone := []string{
		file(gone+".lock", old), file(gone+".log", old), file(gone+".failed", old),
		deadSocket(gone+".sock", old), deadSocket(gone+".sock.new-4242", old),
		deadSocket(failed+".sock", time.Now()),
	}
	wantKept := []string{
		file(failed+".lock", old), file(failed+".log", time.Now().Add(-time.Hour)), file(failed+".failed", time.Now().Add(-time.Hour)),
		file(holding+".lock", old), file(holding+".log", old), deadSocket(holding+".sock", old),
		file(living+".lock", old), file(living+".log", old),
		otherBase + ".sock", otherBase + ".log", otherBase + ".lock",
		"store-dddddddddddddddd.sock", "store-dddddddddddddddd.log",
		// Not ours: other names, other types, links.
		file("store-eeeeeeeeeeeeeeee.log.1", old), file("store-EEEEEEEEEEEEEEEE.log", old),
		file("store-eeeeeeee.log", old), file("notes.txt", old),
		deadSocket("store-ffffffffffffffff.log", old),
		"store-1111111111111111.log", "store-2222222222222222.sock",
	}
	if err := os.Mkdir(filepath.Join(dir, "store-1111111111111111.log"), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(target, old, old)
	if err := os.Symlink(target, filepath.Join(dir, "store-2222222222222222.sock")); err != nil {
		t.Fatal(err)
	}
	lk, err := os.Open(filepath.Join(dir, holding+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if err := unix.Flock(int(lk.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	lg, err := os.Open(filepath.Join(dir, living+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	if err := unix.Flock(int(lg.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}

	check := func(when string) {
		t.Helper()
		for _, name := range wantGone {
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				t.Errorf("%s: %s is still there", when, name)
			}
		}
		for _, name := range wantKept {
			if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
				t.Errorf("%s: %s was removed", when, name)
			}
		}
		if _, err := os.Stat(target); err != nil {
			t.Errorf("%s: the link's target was removed", when)
		}
	}
	// An agent starts (another store): it prunes before it says ready.
	url := pgtest.DB(t)
	c := mustOpen(t, options(url))
	pid := c.Hello().PID
	check("at start")

	// Once it exits (idle), the files of the agents gone since go.
	other.Close()
	waitExit(t, other.Hello().PID, 10*time.Second)
	os.Chtimes(filepath.Join(dir, otherBase+".log"), old, old)
	wantKept = slices.DeleteFunc(wantKept, func(s string) bool { return strings.HasPrefix(s, otherBase) })
	wantGone = append(wantGone, otherBase+".sock", otherBase+".log", otherBase+".lock")
	c.Close()
	waitExit(t, pid, 10*time.Second)
	check("at exit")
	if _, err := os.Lstat(socketPath(home, url)); err == nil {
		t.Error("the agent's own socket is left behind")
	}
	if _, err := os.Lstat(strings.TrimSuffix(socketPath(home, url), ".sock") + ".log"); err != nil {
		t.Errorf("the agent's own log was removed: %v", err)
	}
}

func mustGlob(t *testing.T, dir, pattern string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	for i := range names {
		names[i] = filepath.Base(names[i])
	}
	return names
}
