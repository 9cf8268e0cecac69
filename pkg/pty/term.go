package pty

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	creack "github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// startTerminal starts cmd on a new pseudo-terminal of the given size, in a
// new session with the terminal as its controlling terminal (so the child
// leads its own process group), and returns the master side.
//
// creack/pty leaves the master in blocking mode (its ioctls go through
// Fd()), where neither Close nor a deadline can interrupt a pending Read.
// The master is therefore reopened as a non-blocking file served by Go's
// poller: a drain can then be cut short with a read deadline even while a
// grandchild keeps the terminal open.
func startTerminal(cmd *exec.Cmd, cols, rows int) (*os.File, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	master, err := creack.StartWithSize(cmd, &creack.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	if err != nil {
		return nil, err
	}
	fd, err := unix.Dup(int(master.Fd()))
	master.Close()
	if err != nil {
		return nil, fmt.Errorf("dup terminal: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("terminal non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), nil
}

// setSize changes the terminal's size; the kernel sends SIGWINCH to the
// foreground process group. It goes through the raw connection so the
// master stays non-blocking.
func setSize(master *os.File, cols, rows int) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	err = rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	})
	if err != nil {
		return err
	}
	return ierr
}

// exitStatus turns a wait status into the exit code the tools report:
// the child's own code, or 128+n when signal n killed it.
func exitStatus(ps *os.ProcessState) (code int, signal string) {
	if ps == nil {
		return 1, ""
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return 128 + int(ws.Signal()), SignalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}

// SignalName names a signal the way kill(1) does: "SIGKILL".
func SignalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return fmt.Sprintf("SIG%d", int(s))
}

// ParseSignal reads a signal given as a name (KILL, SIGKILL, kill) or a number.
func ParseSignal(s string) (syscall.Signal, error) {
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && fmt.Sprint(n) == s {
		if n <= 0 || n > 64 {
			return 0, fmt.Errorf("invalid signal %q", s)
		}
		return syscall.Signal(n), nil
	}
	name := s
	if len(name) < 3 || !(name[:3] == "SIG" || name[:3] == "sig") {
		name = "SIG" + name
	}
	sig := unix.SignalNum(toUpper(name))
	if sig == 0 {
		return 0, fmt.Errorf("invalid signal %q", s)
	}
	return sig, nil
}

func toUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
