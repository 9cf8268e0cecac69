package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/remote"
)

// OpenOptions say which agent a client reaches and how to start one.
type OpenOptions struct {
	// Home is the data root; URL and Env name the store, and Path the
	// agent's program (SocketPath).
	Home string
	URL  string
	Env  []string
	// Path and Args start an agent when there is none (Args[0] is the
	// name the program sees): e.g. the pg-queue binary and
	// ["pg-queue", "agent"]. It gets Env with POWERGLIDE_HOME and
	// POWERGLIDE_STORE set to Home and URL, and the readiness pipe as file
	// descriptor 3. Empty Path: connect only.
	Path string
	Args []string
	// Direct opens the store directly for the calls a lost connection
	// leaves unanswered (remote.Options.Direct).
	Direct func() (store.Store, error)
	// StartTimeout bounds the wait for a new agent (default 5 s).
	StartTimeout time.Duration
	// LockWait bounds the wait for the start lock, which another command
	// holds while its agent starts (default 2 s); then, or when ctx ends,
	// Open gives up and the command connects directly.
	LockWait time.Duration
}

// ReadyFD is the file descriptor of the readiness pipe in a started agent.
const ReadyFD = 3

// Open connects to the host's agent of the store, starting one when there
// is none. Any error means: use the store directly.
func Open(ctx context.Context, o OpenOptions) (*remote.Client, error) {
	// The agent runs in / (it must not hold a directory of the command's),
	// so the data root is made absolute for both.
	home, err := filepath.Abs(o.Home)
	if err != nil {
		return nil, err
	}
	o.Home = home
	exe := o.Path
	if exe == "" {
		exe, _ = os.Executable()
	}
	path := SocketPath(o.Home, o.URL, o.Env, exe)
	c, err := connect(path, o)
	if err == nil || refused(err) || o.Path == "" {
		return c, err
	}
	if err := ensureRunDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(path, ".sock")
	if failedRecently(base) {
		return nil, errors.New("store agent: the last one could not start; connecting directly")
	}
	// One starter at a time; the others find its agent when they get the
	// lock, or connect directly when it takes longer than a usual start
	// (a database that does not answer), or when ctx ends.
	wait := o.LockWait
	if wait <= 0 {
		wait = 2 * time.Second
	}
	lctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	lk := flock.New(base + ".lock")
	locked, err := lk.TryLockContext(lctx, 10*time.Millisecond)
	if err != nil || !locked {
		return nil, fmt.Errorf("store agent: another command is starting one; connecting directly (%v)", err)
	}
	defer lk.Close()
	c, err = connect(path, o)
	if err == nil || refused(err) {
		return c, err
	}
	if failedRecently(base) { // while this one waited for the lock
		return nil, errors.New("store agent: the last one could not start; connecting directly")
	}
	// A file of the user's own that is no socket (a stray `: >`) would
	// keep every agent off for good: it goes, under the lock, and the new
	// agent's socket takes its name.
	if replaceable(err) {
		if err := os.Remove(path); err != nil {
			return nil, &RefusedError{Path: path, Why: fmt.Sprintf("not a socket, and it cannot be removed: %v", err)}
		}
	}
	if err := start(ctx, path, o); err != nil {
		// The commands behind this one connect directly for a while
		// rather than each wait for an agent that cannot start (the
		// database down, say).
		os.WriteFile(base+".failed", []byte(err.Error()+"\n"), 0o600)
		return nil, err
	}
	os.Remove(base + ".failed")
	return connect(path, o)
}

// retryStart is how long after an agent failed to start the commands
// connect directly without trying another.
const retryStart = 10 * time.Second

// failedRecently tells whether an agent failed to start in the last
// retryStart.
func failedRecently(base string) bool {
	fi, err := os.Stat(base + ".failed")
	if err != nil {
		return false
	}
	// A time in the future (a clock set back, a touch -d) is no recent
	// failure: it would keep the agent off for as long.
	age := time.Since(fi.ModTime())
	return age >= 0 && age < retryStart
}

// connect reaches the agent at path, after checking that the run
// directory and the socket are private.
func connect(path string, o OpenOptions) (*remote.Client, error) {
	if err := checkPrivate(filepath.Dir(path), true); err != nil {
		return nil, err
	}
	if err := checkPrivate(path, false); err != nil {
		return nil, err
	}
	conn, err := dialUnix(path)
	if err != nil {
		return nil, err
	}
	// The names checked above can be swapped before the connect by
	// whoever may rename in the data root: the kernel says who listens.
	uid, err := peerUID(conn)
	if err == nil && uid != os.Getuid() {
		err = &RefusedError{Path: path, Why: fmt.Sprintf("its listener is uid %d, not %d", uid, os.Getuid())}
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return remote.NewClient(conn, remote.Options{Direct: o.Direct})
}

// dialUnix connects to a socket whose path may be too long for an
// address, through its directory's descriptor.
func dialUnix(path string) (*net.UnixConn, error) {
	if len(path) < 100 {
		return net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return net.DialUnix("unix", nil, &net.UnixAddr{Name: "/proc/self/fd/" + strconv.Itoa(fd) + "/" + filepath.Base(path), Net: "unix"})
}

// start starts an agent in a session of its own, its stderr appended to
// a log beside the socket, and waits until it says it listens.
func start(ctx context.Context, path string, o OpenOptions) error {
	timeout := o.StartTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	logf, err := os.OpenFile(strings.TrimSuffix(path, ".sock")+".log", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	// The agent outlives this command: it must not hold what the command
	// inherited (the write end of a shell's pipe would keep the reader
	// waiting until the agent exits), only 0-2 and the readiness pipe.
	if err := proc.CloseOnExecInherited(); err != nil {
		return fmt.Errorf("store agent: %w", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	cmd := &exec.Cmd{
		Path:        o.Path,
		Args:        o.Args,
		Env:         childEnv(o.Env, o.Home, o.URL),
		Dir:         "/",
		Stderr:      logf,
		ExtraFiles:  []*os.File{pw},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return fmt.Errorf("store agent: start: %w", err)
	}
	// The agent outlives this process; reap it should it end first.
	go cmd.Wait()
	pr.SetReadDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { pr.SetReadDeadline(time.Now()) })
	defer stop()
	line, err := bufio.NewReader(pr).ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case line == "ready":
		return nil
	case strings.HasPrefix(line, "error: "):
		return fmt.Errorf("store agent: %s", strings.TrimPrefix(line, "error: "))
	case err != nil:
		return fmt.Errorf("store agent: no word from the agent: %w", err)
	}
	return fmt.Errorf("store agent: said %q", line)
}
