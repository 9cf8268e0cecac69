package proc

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Child is a process this one starts as the leader of a process group of
// its own. Its group is signalled only while the leader is unreaped: Wait
// first waits for the leader to exit without reaping it (waitid with
// WNOWAIT), so the group id cannot be reused meanwhile, ends what is left
// of the group when EndGroup is set, and only then reaps. A group signal
// after the reap is refused, never sent to whatever took the id since.
//
// Child embeds the exec.Cmd: set its fields, then call the Child's Start
// and Wait (not the Cmd's).
type Child struct {
	*exec.Cmd
	// EndGroup: Wait sends SIGKILL to what is left of the group (a
	// backgrounded grandchild) once the leader has exited.
	EndGroup bool
	// Tied: the child gets SIGKILL when this process ends, even by
	// SIGKILL (PR_SET_PDEATHSIG). For coprocesses, which must not
	// outlive the process that talks to them.
	Tied bool
	// PollExit: Wait waits for the leader's exit on a pidfd in the Go
	// runtime's poller instead of in a blocking waitid (see pollExit): for
	// a server that runs one short command after another (pg-tool's
	// bash). Not for a long program whose output is copied while it runs:
	// pg-pty's throughput fell by 15% with it.
	PollExit bool

	mu     sync.Mutex
	reaped bool
}

// Command makes cmd the leader of a new process group. A cmd made with
// exec.CommandContext is cancelled by SIGKILL to its whole group.
func Command(cmd *exec.Cmd) *Child {
	c := &Child{Cmd: cmd}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if cmd.Cancel != nil { // made with CommandContext
		cmd.Cancel = func() error {
			if ok, err := c.SignalGroup(syscall.SIGKILL); err != nil || !ok {
				return os.ErrProcessDone
			}
			return nil
		}
	}
	return c
}

// Adopt wraps cmd, started elsewhere (pty.Start) as the leader of a process
// group of its own, to signal its group and wait for it as a Child.
func Adopt(cmd *exec.Cmd) *Child { return &Child{Cmd: cmd} }

// Start starts the child.
func (c *Child) Start() error {
	if c.Tied {
		c.SysProcAttr.Pdeathsig = syscall.SIGKILL
		return startTied(c.Cmd)
	}
	return c.Cmd.Start()
}

// SignalGroup sends sig to the child's process group while its leader is
// unreaped. It reports whether the signal was sent.
func (c *Child) SignalGroup(sig syscall.Signal) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Process == nil || c.reaped {
		return false, nil
	}
	if c.Process.Pid <= 1 {
		return false, refuse("process group %d", c.Process.Pid)
	}
	return sent(unix.Kill(-c.Process.Pid, sig))
}

// SetEndGroup sets EndGroup while Wait may be running.
func (c *Child) SetEndGroup() {
	c.mu.Lock()
	c.EndGroup = true
	c.mu.Unlock()
}

// Exited waits until the leader has exited, without reaping it.
func (c *Child) Exited() {
	if c.PollExit && pollExit(c.Process.Pid) {
		return
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, c.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return // nil, or ECHILD: reaped already
		}
	}
}

// Wait waits for the leader to exit, ends the rest of its group when
// EndGroup is set, and reaps it (exec.Cmd.Wait).
func (c *Child) Wait() error {
	if c.Process != nil {
		c.Exited()
		c.mu.Lock()
		if c.EndGroup && !c.reaped { // EndGroup under mu: SetEndGroup
			_ = unix.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
		c.reaped = true
		c.mu.Unlock()
	}
	return c.Cmd.Wait()
}

// Run starts the child and waits for it.
func (c *Child) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs the child and returns its standard output (exec.Cmd.Output
// through the Child's Wait).
func (c *Child) Output() ([]byte, error) {
	if c.Stdout != nil {
		return nil, errors.New("exec: Stdout already set")
	}
	var out bytes.Buffer
	c.Stdout = &out
	err := c.Run()
	return out.Bytes(), err
}

// PR_SET_PDEATHSIG fires when the thread that created the child exits,
// not the process. Go ends a thread only when a goroutine locked to it
// returns; tied children are started from one goroutine that stays
// locked to its thread for the life of the process.
var tied struct {
	once sync.Once
	req  chan func()
}

func startTied(cmd *exec.Cmd) error {
	tied.once.Do(func() {
		tied.req = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for f := range tied.req {
				f()
			}
		}()
	})
	errc := make(chan error, 1)
	tied.req <- func() { errc <- cmd.Start() }
	return <-errc
}

// EnvTied is set (to 1) in the environment of a tied coprocess: one
// that sees it calls DieWithParent, so that it ends with its parent even
// when a shell stands between them (sh -c 'pg-llm serve': the shell gets
// the parent-death signal, and its child must follow).
const EnvTied = "POWERGLIDE_DIE_WITH_PARENT"

// DieWithParentIfTied calls DieWithParent when getenv(EnvTied) is 1.
func DieWithParentIfTied(getenv func(string) string) error {
	if getenv(EnvTied) != "1" {
		return nil
	}
	return DieWithParent()
}

// DieWithParent makes this process get SIGKILL when its parent ends, and
// reports an error if the parent is already gone (it was reparented
// before the call).
func DieWithParent() error {
	ppid := os.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return err
	}
	if os.Getppid() != ppid {
		return errors.New("parent process ended")
	}
	return nil
}

// pollExit waits for the child pid to exit, without reaping it, in the Go
// runtime's poller (on a pidfd) rather than in a blocking waitid: a
// goroutine in a system call keeps the runtime's monitor thread waking
// every 20 µs to 10 ms for the first 10 ms of the wait, which a tool
// server running one short command after another pays for each. It
// reports false when the kernel has no pidfds (before Linux 5.3), for the
// blocking wait to do.
func pollExit(pid int) bool {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	err = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		// Exited, or gone already (reaped): either way, done waiting.
		return err != nil && !errors.Is(err, unix.EINTR) || info.Signo != 0
	})
	return err == nil
}
