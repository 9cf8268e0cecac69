package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
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

// Exec runs argv (looked up on env's PATH) under the policy given as JSON
// (as Wrap writes it) and returns its wait status: the way programs that
// another program starts (pg-pty's terminal programs, MCP servers) enter
// the sandbox. The program gets this process's standard descriptors as
// they are (the terminal itself, not a copy) and nothing else of it.
//
// It runs below an init of its own, as a bash call runs: helper (pg-tool's
// binary) is started as "helper sandbox-exec --init=PATH -- ARGV" in the
// sandbox, as PID 1 of a new PID namespace, and starts the program there.
// When the program ends, so does everything it left behind, even what
// called setsid; and when this process is killed, the namespace goes with
// it. The program is no PID 1, so a signal it does not handle (Ctrl-C from
// its terminal) still ends it. This process stays outside the sandbox,
// waiting: it passes SIGTERM and SIGHUP on (the init hands them to the
// program) and lets SIGINT and SIGQUIT be, which the terminal sends to the
// program itself.
func Exec(policyJSON, helper string, argv, env []string) (syscall.WaitStatus, error) {
	if len(argv) == 0 {
		return 0, errors.New("no command to run")
	}
	var p Policy
	if err := json.Unmarshal([]byte(policyJSON), &p); err != nil {
		return 0, fmt.Errorf("bad policy: %w", err)
	}
	if p.Mode == Off {
		return 0, errors.New("bad policy: mode off needs no sandbox-exec")
	}
	if p.TempDir == "" {
		return 0, errors.New("bad policy: no private temporary directory")
	}
	if helper == "" {
		return 0, errors.New("pg-tool's own binary is unknown: it is the init of the program's namespace")
	}
	path, err := lookPath(argv[0], env)
	if err != nil {
		return 0, err
	}
	p.TTY = ownTerminal()
	sb, err := New(p)
	if err != nil {
		return 0, err
	}
	defer sb.Close() // the TMPDIR is the caller's: it stays
	status, report, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer status.Close()
	cmd := exec.Command(helper, append([]string{ExecCommand, InitFlag + "=" + path, "--"}, argv...)...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdFile(0), stdFile(1), stdFile(2)
	cmd.ExtraFiles = []*os.File{report}
	// In this process's group: the terminal's signals reach the program.
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	err = sb.start(cmd, false)
	report.Close()
	if err != nil {
		return 0, err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				if s == syscall.SIGTERM || s == syscall.SIGHUP {
					_ = cmd.Process.Signal(s)
				}
			case <-done:
				return
			}
		}
	}()
	werr := cmd.Wait()
	if ws, ok := readStatus(status); ok {
		return ws, nil
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		return ws, nil // the init ended without a word (killed)
	}
	return 0, werr
}

// InitFlag makes ExecCommand the init of a program's PID namespace (Init):
// Exec starts it so.
const InitFlag = "--init"

// Init is the init of a sandboxed program's PID namespace, started by
// Exec already confined: it starts path with argv and env on its own
// descriptors 0-2, hands SIGTERM and SIGHUP on to it, reaps whatever else
// ends in the namespace, and when the program ends writes its wait status
// to descriptor 3 (Exec's pipe) and returns it. Its return ends the
// namespace: the kernel kills what is left.
func Init(path string, argv, env []string) (syscall.WaitStatus, error) {
	syscall.CloseOnExec(3) // the status pipe is not the program's
	sigs := make(chan os.Signal, 4)
	// Caught, not ignored (an ignored signal stays ignored in the program);
	// the program gets SIGINT and SIGQUIT from its terminal itself.
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP)
	prog, err := os.StartProcess(path, argv, &os.ProcAttr{Env: env, Files: []*os.File{stdFile(0), stdFile(1), stdFile(2)}})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", argv[0], err)
	}
	go func() {
		for s := range sigs {
			if s == syscall.SIGTERM || s == syscall.SIGHUP {
				_ = prog.Signal(s)
			}
		}
	}()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return 0, fmt.Errorf("wait for %s: %w", argv[0], err)
		case pid != prog.Pid:
			continue // an orphan of the namespace
		}
		if f := os.NewFile(3, "status"); f != nil {
			fmt.Fprintf(f, "%d\n", uint32(ws))
			f.Close()
		}
		return ws, nil
	}
}

// stdFile is this process's descriptor fd (0, 1 or 2) as a file, to hand
// on as it is.
func stdFile(fd uintptr) *os.File { return os.NewFile(fd, "/dev/fd/"+strconv.Itoa(int(fd))) }

// readStatus reads the wait status an init reported.
func readStatus(r io.Reader) (syscall.WaitStatus, bool) {
	b, _ := io.ReadAll(r)
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 0, false
	}
	return syscall.WaitStatus(n), true
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
