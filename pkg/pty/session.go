package pty

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"golang.org/x/sys/unix"
)

// Files of a session directory.
const (
	StateFile  = "session.json" // protocol.PtySession, replaced atomically
	OutputFile = "output.log"   // everything the program printed, appended
	SocketFile = "sock"         // the holder's unix socket
	ScreenFile = "screen.json"  // the last screen, written when the program ends
	CursorFile = "read.offset"  // where the last read ended
	HolderLog  = "holder.log"   // the holder's own diagnostics
)

// Errors the commands map to exit codes.
var (
	ErrNoSession  = errors.New("no such session")
	ErrExists     = errors.New("session already exists")
	ErrNotRunning = errors.New("session is not running")
	ErrBadInput   = errors.New("bad input")
	ErrNoMatch    = errors.New("no match")
	// ErrUnresponsive: the holder is alive but does not answer (stopped, hung).
	ErrUnresponsive = errors.New("holder not responding")
)

// Store is the directory of all sessions, $POWERGLIDE_HOME/pty.
type Store struct {
	Root string
	// CallTimeout bounds a request to a holder, all but wait: a holder
	// that is stopped (SIGSTOP) or hung must not hang the caller. 0 means
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// ProbeTimeout is how long Probe gives a holder to answer; 0 means
	// DefaultProbeTimeout.
	ProbeTimeout time.Duration
}

// NewStore returns the store under the data root home.
func NewStore(home string) Store {
	root := teamdir.Pty(home)
	// The holder runs in the session directory: paths must not depend on
	// the caller's working directory.
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	return Store{Root: root}
}

// Dir is the directory of the session name.
func (s Store) Dir(name string) string { return filepath.Join(s.Root, name) }

// kindError is an error of a kind (one of the Err values above) whose
// message reads naturally, without the kind's own text.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

func validName(name string) error {
	if err := teamdir.ValidName("session", name); err != nil {
		return errorf(ErrBadInput, "%v", err)
	}
	return nil
}

// Load reads a session's state and settles its status: a session whose
// holder is gone without recording an exit is dead.
func (s Store) Load(name string) (*protocol.PtySession, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	dir := s.Dir(name)
	st, err := readState(dir)
	if errors.Is(err, os.ErrNotExist) {
		if _, derr := os.Stat(dir); derr == nil {
			return nil, fmt.Errorf("session %s: %s is missing (a start that failed?); remove it with pg-pty clean %s", name, StateFile, name)
		}
		return nil, errorf(ErrNoSession, "no session %s", name)
	}
	if err != nil {
		return nil, err
	}
	if st.Status == protocol.PtyRunning && !proc.Matches(st.HolderPID, st.HolderStart) {
		// The holder may have just recorded the exit and left.
		if again, err := readState(dir); err == nil {
			st = again
		}
		if st.Status == protocol.PtyRunning && !proc.Matches(st.HolderPID, st.HolderStart) {
			st.Status = protocol.PtyDead
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, OutputFile)); err == nil {
		st.OutputBytes = fi.Size()
	}
	return st, nil
}

func readState(dir string) (*protocol.PtySession, error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		return nil, err
	}
	var st protocol.PtySession
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, StateFile), err)
	}
	return &st, nil
}

// writeState replaces session.json atomically. Only the record of the
// program's end is made durable (fsync): a running state describes
// processes that cannot outlive a crash of the machine (they show as dead
// then), and two fsyncs would dominate the start of a session.
func writeState(dir string, st *protocol.PtySession, durable bool) error {
	c := *st
	c.OutputBytes = 0
	b, err := json.Marshal(&c)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	path := filepath.Join(dir, StateFile)
	if durable {
		return atomicfile.WriteFile(path, b, teamdir.FileMode)
	}
	tmp, err := os.CreateTemp(dir, "."+StateFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), teamdir.FileMode); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// List loads every session, sorted by name.
func (s Store) List() ([]*protocol.PtySession, error) {
	entries, err := os.ReadDir(s.Root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*protocol.PtySession
	for _, e := range entries {
		if !e.IsDir() || validName(e.Name()) != nil {
			continue
		}
		st, err := s.Load(e.Name())
		if err != nil {
			if errors.Is(err, ErrNoSession) {
				continue // removed meanwhile
			}
			// A directory without a readable state still shows up.
			st = &protocol.PtySession{Type: "session", Name: e.Name(), Status: protocol.PtyDead}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// socketPath returns an address for the socket in dir. A unix socket path
// is limited to 107 bytes; a longer one is reached through the directory
// opened as /proc/self/fd/N. The returned func releases that descriptor.
func socketPath(dir string) (string, func(), error) {
	p := filepath.Join(dir, SocketFile)
	if len(p) < 100 {
		return p, func() {}, nil
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return "/proc/self/fd/" + strconv.Itoa(fd) + "/" + SocketFile, func() { unix.Close(fd) }, nil
}

// dial connects to a session's holder.
func dial(dir string, timeout time.Duration) (net.Conn, error) {
	p, release, err := socketPath(dir)
	if err != nil {
		return nil, err
	}
	defer release()
	return net.DialTimeout("unix", p, timeout)
}

func nowRFC3339() string { return time.Now().UTC().Format(time.RFC3339Nano) }
