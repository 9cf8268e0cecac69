package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/powerglide/powerglide/pkg/proc"
)

// ExecCommand is the hidden pg-tool command that runs Exec: Wrap puts it
// in front of a command line.
const ExecCommand = "sandbox-exec"

// Wrap returns the command line that runs argv under the sandbox through
// helper (pg-tool's own binary): for programs that another program starts,
// such as pg-pty's terminal programs and MCP servers. Under off it is argv.
func (sb *Sandbox) Wrap(helper string, argv []string) ([]string, error) {
	if sb.policy.Mode == Off {
		return argv, nil
	}
	if err := sb.prepare(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(sb.policy)
	if err != nil {
		return nil, err
	}
	return append([]string{helper, ExecCommand, "--policy", string(b), "--"}, argv...), nil
}

// Exec confines the calling process under the policy given as JSON (as
// Wrap writes it) and replaces it with argv, looked up on env's PATH. It
// returns only on failure.
func Exec(policyJSON string, argv, env []string) error {
	if len(argv) == 0 {
		return errors.New("no command to run")
	}
	var p Policy
	if err := json.Unmarshal([]byte(policyJSON), &p); err != nil {
		return fmt.Errorf("bad policy: %w", err)
	}
	if p.Mode == Off {
		return errors.New("bad policy: mode off needs no sandbox-exec")
	}
	if p.TempDir == "" {
		return errors.New("bad policy: no private temporary directory")
	}
	path, err := lookPath(argv[0], env)
	if err != nil {
		return err
	}
	p.TTY = ownTerminal()
	pl, err := newPlan(p)
	if err != nil {
		return err
	}
	// Locked for good: the restrictions are this thread's, and execve
	// keeps them.
	runtime.LockOSThread()
	if err := proc.CloseOnExecInherited(); err != nil {
		return fmt.Errorf("keep inherited descriptors from the command: %w", err)
	}
	if _, err := pl.restrictThread(-1); err != nil {
		return &UnavailableError{Mode: p.Mode, Missing: []string{err.Error()}}
	}
	return fmt.Errorf("exec %s: %w", argv[0], syscall.Exec(path, argv, env))
}

// ownTerminal is the terminal the program may open by path: the
// controlling terminal of the session it leads (a pg-pty session's
// program), when that is its stdin. A program in someone else's session
// (an MCP server started from a terminal) is detached from that terminal
// instead, so its /dev/tty is not the user's.
func ownTerminal() string {
	if !detachTerminal() {
		return ""
	}
	// TIOCGSID answers only for the caller's controlling terminal.
	if _, err := unix.IoctlGetInt(0, unix.TIOCGSID); err != nil {
		return ""
	}
	tty, err := os.Readlink("/proc/self/fd/0")
	if err != nil || !strings.HasPrefix(tty, "/dev/pts/") {
		return ""
	}
	return tty
}

// detachTerminal lets the process go of its controlling terminal, so
// that what it starts has none; it reports false when it did (or had
// none), true when the process leads the terminal's session, which keeps
// it (letting go would hang the terminal up for its other processes).
func detachTerminal() (leader bool) {
	if sid, err := unix.Getsid(0); err == nil && sid == unix.Getpid() {
		f, err := os.OpenFile("/dev/tty", os.O_RDWR|unix.O_NOCTTY, 0)
		if err != nil {
			return false // no controlling terminal
		}
		f.Close()
		return true
	}
	if f, err := os.OpenFile("/dev/tty", os.O_RDWR|unix.O_NOCTTY, 0); err == nil {
		_ = unix.IoctlSetInt(int(f.Fd()), unix.TIOCNOTTY, 0)
		f.Close()
	}
	return false
}

// lookPath finds a program on the PATH of env, as the shell would.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found", name)
}
