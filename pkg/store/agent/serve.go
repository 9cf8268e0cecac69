package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/remote"
)

// DefaultIdle is how long an agent waits with no client before it exits.
const DefaultIdle = 60 * time.Second

// ServeOptions say what an agent serves and for how long.
type ServeOptions struct {
	// Home is the data root; URL and Env name the store (SocketPath).
	Home string
	URL  string
	Env  []string
	// Open opens the store the agent serves, with its connection pool.
	Open func(ctx context.Context) (store.Store, error)
	// Idle: exit after this long with no client (DefaultIdle when 0).
	Idle time.Duration
	// Check is how often the agent checks that its socket is still its
	// own (default 1 s).
	Check time.Duration
	// Ready, when set, gets "ready\n" once the agent listens, or
	// "error: <message>\n" when it cannot; it is closed either way.
	Ready io.WriteCloser
	// Log gets one line per event worth knowing (start, exit, refused
	// peers).
	Log io.Writer
}

// Serve runs an agent until it is idle for o.Idle, its socket is removed
// or replaced, or ctx ends.
func Serve(ctx context.Context, o ServeOptions) (err error) {
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if o.Check <= 0 {
		o.Check = time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	defer func() {
		if err != nil {
			fmt.Fprintf(o.Log, "store agent %d: %v\n", os.Getpid(), err)
		}
		if o.Ready != nil {
			if err != nil {
				fmt.Fprintf(o.Ready, "error: %s\n", oneLine(err.Error()))
			}
			o.Ready.Close()
		}
	}()
	dir := RunDir(o.Home)
	if err := ensureRunDir(dir); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	key := Key(o.URL, o.Env, exe)
	path := filepath.Join(dir, "store-"+key+".sock")
	// Without the lock (a file system without flock), the agents that
	// prune still find this one running by its socket.
	if life, err := lockLife(strings.TrimSuffix(path, ".sock")); err != nil {
		fmt.Fprintf(o.Log, "store agent %d: %v\n", os.Getpid(), err)
	} else {
		defer life.Close()
	}
	// Listen before opening the store: an agent that cannot listen has
	// not connected to the database, nor migrated it. The clients that
	// connect meanwhile wait for the hello, sent once the store is open.
	ln, ino, err := listen(dir, filepath.Base(path))
	if err != nil {
		return err
	}
	st, err := o.Open(ctx)
	if err != nil {
		// No socket stays behind; the clients that came meanwhile are
		// hung up on without a hello and connect directly.
		unlisten(ln, path, ino)
		return err
	}
	defer st.Close()
	// The files of the agents gone (other stores, builds, hosts of the
	// data root) go; so they do again when this one exits.
	prune(dir, key, time.Now(), o.Log)
	defer func() { prune(dir, key, time.Now(), o.Log) }()
	fmt.Fprintf(o.Log, "store agent %d: serving %s store on %s\n", os.Getpid(), st.Kind(), path)
	if o.Ready != nil {
		fmt.Fprintln(o.Ready, "ready")
		o.Ready.Close()
		o.Ready = nil
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a := &agent{st: st, log: o.Log, idle: make(chan bool, 1)}
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		a.accept(cctx, ln)
	}()
	err = a.watch(ctx, path, ino, o)
	// Stop taking clients first, and give the name up while it is still
	// this agent's: a command that comes now starts a new agent. The
	// clients already in get the answers of the calls in flight; a
	// waiting call (claim --wait) stops, and is told to go on elsewhere
	// when it has claimed nothing.
	unlisten(ln, path, ino)
	<-accepting
	cancel()
	a.wait()
	return err
}

// listen binds the socket under a temporary name, makes it 0600 and
// renames it into place, replacing a stale one: a client never connects
// to a socket that others could reach. It returns the socket's inode.
func listen(dir, name string) (*net.UnixListener, uint64, error) {
	// A socket path is limited to ~108 bytes; through the directory's
	// descriptor any data root works.
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	tmp := name + ".new-" + strconv.Itoa(os.Getpid())
	os.Remove(filepath.Join(dir, tmp))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: "/proc/self/fd/" + strconv.Itoa(fd) + "/" + tmp, Net: "unix"})
	if err != nil {
		return nil, 0, fmt.Errorf("listen on %s: %w", filepath.Join(dir, tmp), err)
	}
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, uint64, error) {
		ln.Close()
		os.Remove(filepath.Join(dir, tmp))
		return nil, 0, err
	}
	if err := os.Chmod(filepath.Join(dir, tmp), 0o600); err != nil {
		return fail(err)
	}
	if err := os.Rename(filepath.Join(dir, tmp), filepath.Join(dir, name)); err != nil {
		return fail(err)
	}
	fi, err := os.Lstat(filepath.Join(dir, name))
	if err != nil {
		return fail(err)
	}
	return ln, inode(fi), nil
}

// unlisten stops listening and removes the socket at path while it is
// still this agent's (inode ino): a command that comes now starts another
// agent.
func unlisten(ln *net.UnixListener, path string, ino uint64) {
	ln.Close()
	if fi, err := os.Lstat(path); err == nil && inode(fi) == ino {
		os.Remove(path)
	}
}

func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// agent is a running agent's state.
type agent struct {
	st  store.Store
	log io.Writer

	mu     sync.Mutex
	active int
	conns  sync.WaitGroup
	idle   chan bool // true: the last client left; false: a client came
}

func (a *agent) wait() { a.conns.Wait() }

func (a *agent) accept(ctx context.Context, ln *net.UnixListener) {
	for {
		c, err := ln.AcceptUnix()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // out of descriptors, say: the clients wait a little
			fmt.Fprintf(a.log, "store agent %d: accept: %v\n", os.Getpid(), err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if err := checkPeer(c); err != nil {
			fmt.Fprintf(a.log, "store agent %d: %v\n", os.Getpid(), err)
			c.Close()
			continue
		}
		a.track(+1)
		a.conns.Add(1)
		go func() {
			defer a.conns.Done()
			defer a.track(-1)
			defer c.Close()
			// An agent told to stop lets the calls in flight answer, then
			// hangs up (remote.Serve).
			remote.Serve(ctx, c, a.st)
		}()
	}
}

// track counts clients and tells watch when there are none.
func (a *agent) track(d int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.active += d
	select { // only the latest news matters
	case <-a.idle:
	default:
	}
	a.idle <- a.active == 0
}

// watch returns when the agent has had no client for o.Idle, when its
// socket is no longer its own, or when ctx ends.
func (a *agent) watch(ctx context.Context, path string, ino uint64, o ServeOptions) error {
	idle := time.NewTimer(o.Idle)
	defer idle.Stop()
	check := time.NewTicker(o.Check)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			// A stop (SIGTERM, SIGINT: the cause says which) is worth a
			// line as much as an idle exit: the log tells why it ended.
			fmt.Fprintf(o.Log, "store agent %d: told to stop (%v), exiting\n", os.Getpid(), context.Cause(ctx))
			return nil
		case empty := <-a.idle:
			idle.Stop()
			if empty {
				idle.Reset(o.Idle)
			}
		case <-idle.C:
			a.mu.Lock()
			n := a.active
			a.mu.Unlock()
			if n == 0 {
				fmt.Fprintf(o.Log, "store agent %d: idle for %s, exiting\n", os.Getpid(), o.Idle)
				return nil
			}
		case <-check.C:
			fi, err := os.Lstat(path)
			if err != nil || inode(fi) != ino {
				fmt.Fprintf(o.Log, "store agent %d: %s was removed or replaced, exiting\n", os.Getpid(), path)
				return nil
			}
		}
	}
}

// checkPeer refuses a client of another user.
func checkPeer(c *net.UnixConn) error {
	uid, err := peerUID(c)
	if err != nil {
		return err
	}
	if uid != os.Getuid() {
		return errors.New("refused a client of uid " + strconv.Itoa(uid))
	}
	return nil
}

// peerUID is the user of the process at the other end of c, as the
// kernel tells it (SO_PEERCRED): that of the process that connected, or
// that listens.
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Uid), nil
}

func oneLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
