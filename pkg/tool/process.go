package tool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/sandbox"
)

// env is the environment of the commands a session starts: the
// allow-listed variables of Options.Env (or the process's), --pass-env,
// and the sandbox's TMPDIR.
func (s *Session) env() []string {
	env := s.opts.Env
	if env == nil {
		env = os.Environ()
	}
	return s.sandbox.Env(env, s.opts.PassEnv)
}

// ptyEnv is pg-pty's environment: the commands' one plus what pg-pty needs
// to find its sessions and settings (own names those). The programs it
// starts get the commands' one: term_start has pg-pty leave own out.
func (s *Session) ptyEnv() (env, own []string) {
	env = s.env()
	src := s.opts.Env
	if src == nil {
		src = os.Environ()
	}
	for _, kv := range src {
		name, _, _ := strings.Cut(kv, "=")
		if name == "POWERGLIDE_HOME" || name == "POWERGLIDE_CONFIG" || strings.HasPrefix(name, "POWERGLIDE_PTY_") {
			if slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, name+"=") }) {
				continue // given to the commands too (--pass-env)
			}
			env = append(env, kv)
			own = append(own, name)
		}
	}
	return env, own
}

// run is one command a session runs to its end.
type run struct {
	timeout        time.Duration // 0: none
	dir            string
	env            []string
	stdin          []byte // nil or empty: /dev/null
	stdout, stderr io.Writer
	extra          []*os.File // the command's fds 3, 4, ...
}

// runGroup runs a command under the session's sandbox and kills every
// process it started on timeout or cancellation, and when it ends: a
// sandboxed command is the init of its own PID namespace, so its end ends
// them all; unsandboxed, what is left of its process group is killed. It
// returns the exit code (128+n for a signal).
func (s *Session) runGroup(ctx context.Context, r run, name string, args ...string) (int, error) {
	return runIn(ctx, s.sandbox, r, name, args...)
}

// ErrTimeout is what Exec returns when its command ran out of time (it
// has been killed).
var ErrTimeout = errTimeout

// Exec runs argv in the root under the session's sandbox, with the
// commands' environment, as a bash call runs it, its output written to
// stdout and stderr: the way pg-loop runs its verify command. It returns
// the command's exit code (128+n when signal n ended it).
func (s *Session) Exec(ctx context.Context, argv []string, timeout time.Duration, stdout, stderr io.Writer) (int, error) {
	if len(argv) == 0 {
		return -1, errors.New("no command to run")
	}
	return s.runGroup(ctx, run{timeout: timeout, dir: s.rootPath, env: s.env(), stdout: stdout, stderr: stderr}, argv[0], argv[1:]...)
}

// devNull is the stdin of commands that read nothing: one open file for
// all of them, where exec.Cmd would open /dev/null for each.
var devNull = sync.OnceValue(func() *os.File {
	f, _ := os.Open(os.DevNull)
	return f // nil on failure: exec.Cmd opens it itself
})

// runIn is runGroup under a given sandbox: pg-pty, pg-tool's own helper,
// runs unconfined (the programs it starts enter the sandbox themselves).
func runIn(ctx context.Context, sb *sandbox.Sandbox, r run, name string, args ...string) (int, error) {
	cmd := proc.Command(command(name, args...))
	cmd.Dir = r.dir
	cmd.Env = r.env
	if len(r.stdin) > 0 {
		cmd.Stdin = bytes.NewReader(r.stdin)
	} else if f := devNull(); f != nil {
		cmd.Stdin = f
	}
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	cmd.ExtraFiles = r.extra
	// Background children left behind in the group are ended when the
	// command exits, before it is reaped: a call must not leak processes.
	// (A sandboxed command's PID namespace has ended them all already.)
	cmd.EndGroup = true
	// A server runs one short command after another: wait in the poller.
	cmd.PollExit = true
	// Children that keep the output pipe open must not hold us forever.
	cmd.WaitDelay = 2 * time.Second
	var err error
	if sb.Mode() == sandbox.Off {
		cmd.Tied = true // the command ends with pg-tool, even killed by SIGKILL
		err = cmd.Start()
	} else {
		err = sb.Start(cmd.Cmd) // tied to pg-tool by the sandbox
	}
	if err != nil {
		var ue *sandbox.UnavailableError
		if errors.As(err, &ue) {
			return -1, err
		}
		return -1, fmt.Errorf("start %s: %w", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timer <-chan time.Time
	if r.timeout > 0 {
		t := time.NewTimer(r.timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case err = <-done:
	case <-timer:
		_, _ = cmd.SignalGroup(syscall.SIGKILL)
		<-done
		return -1, errTimeout
	case <-ctx.Done():
		_, _ = cmd.SignalGroup(syscall.SIGKILL)
		<-done
		return -1, context.Cause(ctx)
	}
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		return cmd.ProcessState.ExitCode(), nil
	}
	return -1, err
}

// command is exec.Command with the program's path remembered: bash is
// looked up on pg-tool's PATH (a stat per directory) for every call
// otherwise. argv[0] stays the name as given.
func command(name string, args ...string) *exec.Cmd {
	key := name + "\x00" + os.Getenv("PATH")
	if p, ok := programs.Load(key); ok {
		return &exec.Cmd{Path: p.(string), Args: append([]string{name}, args...)}
	}
	cmd := exec.Command(name, args...)
	if cmd.Err == nil && !strings.Contains(name, "/") {
		programs.Store(key, cmd.Path)
	}
	return cmd
}

var programs sync.Map // name and PATH -> the program's path

// sandboxed is the command line that runs argv under the session's
// sandbox when another program starts it (pg-pty, the MCP SDK).
func (s *Session) sandboxed(argv []string) ([]string, error) {
	if s.sandbox.Mode() == sandbox.Off {
		return argv, nil
	}
	if s.opts.Helper == "" {
		return nil, errors.New("sandbox: pg-tool's own binary is unknown, so this program cannot be started sandboxed")
	}
	return s.sandbox.Wrap(s.opts.Helper, argv)
}

// SandboxReport says what confines the session's commands.
func (s *Session) SandboxReport() protocol.SandboxReport {
	return s.sandbox.Report(s.env())
}

// unconfined runs pg-tool's own helpers (pg-pty).
var unconfined, _ = sandbox.New(sandbox.Policy{Mode: sandbox.Off})
