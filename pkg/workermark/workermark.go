// Package workermark keeps worker marks: the proof, on this host, that a
// process is a team's worker. A worker record (worker-<n>.json, a row of
// a PostgreSQL store) only says which pid a worker has, and anyone who
// can write a record (another OS user sharing the store, a hand edit) can
// name any process there. A mark is a file
//
//	$POWERGLIDE_HOME/run/workers/<pid>-<pid_start>
//
// made by the user who started the worker (pg-loop for its own pid,
// pg-monitor beat for the pid it names, pg-monitor run for its children),
// in a directory only that user can write. The watchers (pg-monitor,
// pg-dash's stop key) signal a recorded process only when its mark is in
// their own data root and names the record's team and worker (Check).
package workermark

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/proc"
	"golang.org/x/sys/unix"
)

// Mark is the content of a mark file.
type Mark struct {
	Team   string `json:"team"`
	Worker string `json:"worker"`
	HostID string `json:"host_id,omitempty"` // proc.Host.ID of the host that made it
}

// maxSize bounds what Check reads of a mark file.
const maxSize = 4096

// Dir is the directory of the marks under the data root home.
func Dir(home string) string { return filepath.Join(home, "run", "workers") }

// Name is the file name of the mark of process pid started at start.
func Name(pid int, start string) string { return strconv.Itoa(pid) + "-" + start }

// ErrUnmarked is what errors.Is finds in every refusal of Check.
var ErrUnmarked = errors.New("no worker mark")

// UnmarkedError says why a process is not known as a team's worker.
type UnmarkedError struct {
	PID          int
	Team, Worker string
	Why          string // what was found instead of a mark
}

func (e *UnmarkedError) Error() string {
	return fmt.Sprintf("pid %d carries no worker mark of team %s worker %s in %s (%s)", e.PID, e.Team, e.Worker, DirName, e.Why)
}

// DirName is how messages name the marks' directory: the same words for
// every data root, which a reader maps to theirs.
const DirName = "$POWERGLIDE_HOME/run/workers"

func (e *UnmarkedError) Is(target error) bool { return target == ErrUnmarked }

// notStarted is why a process has no mark at all.
const notStarted = "not started by this user's pg-loop, pg-monitor run or pg-monitor beat, or by an older version"

// Make marks process pid (started at start) as worker m.Worker of team
// m.Team, in the data root home: the file is created 0600 in a 0700
// directory, atomically, unless the same mark is there already (a beat
// repeats it every heartbeat). Making a new mark prunes the marks of
// processes that have ended. The caller has checked that pid is a
// process of its own user (a mark of another user's process would let a
// monitor signal it).
func Make(home string, pid int, start string, m Mark) error {
	switch {
	case home == "":
		return errors.New("worker mark: no data root")
	case pid <= 0 || !decimal(start):
		return fmt.Errorf("worker mark: bad process %d start %q", pid, start)
	}
	dir := Dir(home)
	if err := ensureDir(dir); err != nil {
		return err
	}
	path := filepath.Join(dir, Name(pid, start))
	if old, err := read(path); err == nil && old == m {
		return nil
	}
	prune(dir)
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteRedacted(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("worker mark: %w", err)
	}
	return nil
}

// Remove removes the mark of process pid started at start, if any.
func Remove(home string, pid int, start string) error {
	err := os.Remove(filepath.Join(Dir(home), Name(pid, start)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("worker mark: %w", err)
	}
	return nil
}

// Check says why process pid (started at start) must not be signalled as
// worker worker of team team, or nil: its mark must be in the data root
// home, name that team and worker (and this host, hostID, when both say
// one), be a regular file that only its owner can write, in a directory
// others cannot write, and be owned by the user the process runs as (so
// a mark made by one user never names another user's process).
func Check(home string, pid int, start, team, worker, hostID string) error {
	dir := Dir(home)
	refuse := func(format string, a ...any) error {
		return &UnmarkedError{PID: pid, Team: team, Worker: worker, Why: fmt.Sprintf(format, a...)}
	}
	switch {
	case home == "":
		return refuse("no data root to look for it in")
	case pid <= 0 || !decimal(start):
		return refuse("no pid and start time recorded")
	}
	df, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return refuse("%s", notStarted)
		}
		return refuse("%v", err)
	}
	defer df.Close()
	dst, err := owner(df)
	if err != nil {
		return refuse("%v", err)
	}
	if dst.Mode&0o022 != 0 {
		return refuse("the directory has mode %04o: other users may write it", dst.Mode&0o7777)
	}
	fd, err := unix.Openat(int(df.Fd()), Name(pid, start), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return refuse("%s", notStarted)
		}
		return refuse("open mark: %v", err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, Name(pid, start)))
	defer f.Close()
	fst, err := owner(f)
	if err != nil {
		return refuse("%v", err)
	}
	switch {
	case fst.Mode&unix.S_IFMT != unix.S_IFREG:
		return refuse("its mark is not a regular file")
	case fst.Mode&0o022 != 0:
		return refuse("its mark has mode %04o: other users may write it", fst.Mode&0o7777)
	case dst.Uid != fst.Uid && int(dst.Uid) != os.Geteuid():
		return refuse("its mark is owned by uid %d, in a directory of uid %d", fst.Uid, dst.Uid)
	}
	uid, err := proc.UID(pid)
	if err != nil {
		return refuse("%v", err)
	}
	if uid != int(fst.Uid) {
		return refuse("its mark was made by uid %d, but the process runs as uid %d", fst.Uid, uid)
	}
	m, err := decode(f)
	if err != nil {
		return refuse("%v", err)
	}
	switch {
	case m.Team != team || m.Worker != worker:
		return refuse("its mark names team %s worker %s", m.Team, m.Worker)
	case m.HostID != "" && hostID != "" && m.HostID != hostID:
		return refuse("its mark was made on another host (host id %s)", m.HostID)
	}
	return nil
}

// ensureDir makes the marks' directory 0700 and refuses one that is a
// link, another user's, or writable by others.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("worker mark: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("worker mark: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("worker mark: %s is not a directory", dir)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("worker mark: %s is not owned by this user", dir)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("worker mark: %s has mode %04o, want 0700", dir, fi.Mode().Perm())
	}
	return nil
}

// prune removes the marks of processes that have ended or whose pid was
// reused. It only unlinks names of the form <pid>-<start> (a link is
// removed, never followed), and leaves whatever it cannot read alone.
func prune(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, start, ok := parseName(e.Name())
		if !ok {
			continue
		}
		if _, err := proc.ReadStat(pid); err != nil && !errors.Is(err, proc.ErrGone) {
			continue // not readable here: not known to be gone
		}
		if !proc.Matches(pid, start) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// parseName splits a mark's file name, ^[0-9]+-[0-9]+$.
func parseName(name string) (pid int, start string, ok bool) {
	i := bytes.IndexByte([]byte(name), '-')
	if i < 0 || !decimal(name[:i]) || !decimal(name[i+1:]) {
		return 0, "", false
	}
	pid, err := strconv.Atoi(name[:i])
	if err != nil || pid <= 0 {
		return 0, "", false
	}
	return pid, name[i+1:], true
}

func decimal(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func owner(f *os.File) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	return &st, nil
}

// read reads the mark at path, never following a link.
func read(path string) (Mark, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return Mark{}, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := owner(f)
	if err != nil {
		return Mark{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return Mark{}, errors.New("not a regular file")
	}
	return decode(f)
}

func decode(r io.Reader) (Mark, error) {
	var m Mark
	b, err := io.ReadAll(io.LimitReader(r, maxSize+1))
	if err != nil {
		return m, fmt.Errorf("read mark: %w", err)
	}
	if len(b) > maxSize {
		return m, fmt.Errorf("its mark is larger than %d bytes", maxSize)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("its mark is not valid: %v", err)
	}
	return m, nil
}
