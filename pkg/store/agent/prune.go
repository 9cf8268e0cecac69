package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/powerglide/powerglide/pkg/internal/lazyre"
)

// KeepLogs is how long the log (and the .failed note) of an agent that no
// longer runs stays in the run directory: long enough to read why a start
// failed.
const KeepLogs = 24 * time.Hour

// keepTemp is how old a socket's temporary name (store-<hash>.sock.new-<pid>)
// must be before it counts as left by a crash: an agent renames it into
// place at once.
const keepTemp = time.Minute

// agentFile matches the names of an agent's files: store-<hash> and a
// suffix, or the socket's temporary name.
var agentFile = lazyre.Compile(`^store-([0-9a-f]{16})\.(sock|lock|log|failed|sock\.new-[0-9]+)$`)

// lockLife takes the lock that says an agent runs: a shared flock on its
// log, held for the agent's life, which prune cannot take while it is
// held. It returns the open log, to close when the agent exits.
func lockLife(base string) (*os.File, error) {
	for range 3 {
		f, err := os.OpenFile(base+".log", os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		// A prune may have removed the file between the open and the
		// lock: hold the lock on the file that has the name.
		if same(f, base+".log") {
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("lock %s.log: removed under the agent, again and again", base)
}

// same tells whether the open file f is the one at path.
func same(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

// prune removes from the run directory dir the files of the agents that
// no longer run, other than those of key own: a socket no one listens on
// at once, a temporary socket name after keepTemp, and the start lock, the
// log and the .failed note once the log and the note are older than
// KeepLogs. An agent is taken to run while its log is locked (lockLife),
// while a command holds its start lock, or while its socket answers. Only
// files of the agents' exact names, owned by this user and of their own
// type (sockets, regular files), are touched, and no link is followed.
// It logs what it removed on log.
func prune(dir, own string, now time.Time, log io.Writer) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	groups := map[string][]string{} // key: suffixes
	for _, e := range ents {
		m := agentFile().FindStringSubmatch(e.Name())
		if m != nil && m[1] != own {
			groups[m[1]] = append(groups[m[1]], m[2])
		}
	}
	for key, suffixes := range groups {
		g := &group{base: filepath.Join(dir, "store-"+key), now: now}
		if removed := g.prune(suffixes); len(removed) > 0 {
			fmt.Fprintf(log, "store agent %d: removed %v of store-%s, which no longer runs\n", os.Getpid(), removed, key)
		}
	}
}

// group is the files of one agent.
type group struct {
	base string
	now  time.Time
}

// prune removes the group's stale files and returns their suffixes.
func (g *group) prune(suffixes []string) (removed []string) {
	// The files of an agent gone within the day, without a socket, all
	// stay: no need to look closer.
	if !g.logsOld() && !slices.ContainsFunc(suffixes, func(s string) bool { return strings.HasPrefix(s, "sock") }) {
		return nil
	}
	// Hold both locks while deciding and removing: a command starting
	// this agent holds the start lock, a running agent its log's.
	for _, lk := range []string{".lock", ".log"} {
		f, ok := g.lock(lk)
		if !ok {
			return nil
		}
		if f != nil {
			defer f.Close()
		}
	}
	if g.answers() {
		return nil
	}
	old := g.logsOld()
	for _, s := range suffixes {
		sfx := "." + s
		var ok bool
		switch {
		case s == "sock":
			ok = g.remove(sfx, os.ModeSocket, 0)
		case s == "lock" || s == "log" || s == "failed":
			ok = old && g.remove(sfx, 0, 0)
		default: // sock.new-<pid>
			ok = g.remove(sfx, os.ModeSocket, keepTemp)
		}
		if ok {
			removed = append(removed, s)
		}
	}
	return removed
}

// logsOld tells whether the group's log and .failed note (those there
// are) are older than KeepLogs.
func (g *group) logsOld() bool {
	for _, s := range []string{".log", ".failed"} {
		if fi, err := os.Lstat(g.base + s); err == nil && g.now.Sub(fi.ModTime()) < KeepLogs {
			return false
		}
	}
	return true
}

// lock takes an exclusive flock on the group's file of suffix sfx without
// waiting. ok is false when someone holds it (or it is not ours); f is
// nil when there is no such file.
func (g *group) lock(sfx string) (f *os.File, ok bool) {
	path := g.base + sfx
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil, true
	}
	if !g.ours(path, 0) {
		return nil, false
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil || !same(f, path) {
		f.Close()
		return nil, false
	}
	return f, true
}

// answers tells whether someone listens on the group's socket (an agent
// of an earlier version, which holds no lock while it runs).
func (g *group) answers() bool {
	path := g.base + ".sock"
	if !g.ours(path, os.ModeSocket) {
		return false
	}
	c, err := dialUnix(path)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// ours tells whether path is a file of this user of type typ (0: a
// regular file), not a link.
func (g *group) ours(path string, typ os.FileMode) bool {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Type() != typ {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// remove removes the group's file of suffix sfx when it is ours, of type
// typ and older than age.
func (g *group) remove(sfx string, typ os.FileMode, age time.Duration) bool {
	path := g.base + sfx
	fi, err := os.Lstat(path)
	if err != nil || !g.ours(path, typ) || g.now.Sub(fi.ModTime()) < age {
		return false
	}
	return os.Remove(path) == nil
}
