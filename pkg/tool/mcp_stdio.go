package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/sandbox"
)

// startStdio starts the server's command, sandboxed, in its own process
// group, and connects to it over its stdin and stdout.
func (srv *mcpServer) startStdio(ctx context.Context) (*mcp.ClientSession, error) {
	argv, err := srv.s.sandboxed([]string{"bash", "-c", "exec " + srv.cmdline})
	if err != nil {
		return nil, fmt.Errorf("mcp server %s (%s) did not start: %w", srv.name, srv.cmdline, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = srv.s.rootPath
	cmd.Env = srv.s.env()
	tail := &stderrTail{}
	cmd.Stderr = io.MultiWriter(&prefixWriter{w: srv.s.opts.Log, prefix: "mcp " + srv.name + ": "}, tail)
	// Its own process group: stopping the server kills what it started
	// too (npx runs the real server as a child).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A child that keeps stderr open must not hold up Wait.
	cmd.WaitDelay = time.Second
	tr := &keptTransport{CommandTransport: mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}}
	cs, err := mcpClient().Connect(ctx, tr, nil)
	if err != nil {
		// The failed connection was closed, which reaped the server
		// (its exit status is what Close returns) unless it hung: then
		// its group is killed while the pidfd of the os.Process says it
		// is not reaped.
		var exit error
		if tr.conn != nil {
			exit = tr.conn.Close()
		}
		if cmd.Process != nil && cmd.Process.Signal(syscall.Signal(0)) == nil {
			_, _ = proc.Adopt(cmd).SignalGroup(syscall.SIGKILL)
			_ = cmd.Wait()
		}
		return nil, srv.startError(ctx, tr.conn != nil, err, exit, tail.String())
	}
	srv.cmd = cmd
	srv.start, _ = proc.StartTime(cmd.Process.Pid)
	return cs, nil
}

// startError says why a stdio server did not answer initialize, in one
// line: it exited (with its status and last line of stderr; a server
// that closed its output and exited when its input was closed counts as
// exiting with status 0), or it took
// too long, most often because it downloads a package first (npx -y, uvx),
// which the sandbox's lack of network makes hang until its retries end.
func (srv *mcpServer) startError(ctx context.Context, started bool, err, exit error, stderr string) error {
	what := fmt.Sprintf("mcp server %s (%s)", srv.name, srv.cmdline)
	if stderr != "" {
		stderr = "; its last line on stderr: " + stderr
	}
	if ctx.Err() == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		var ee *exec.ExitError
		switch {
		case errors.As(exit, &ee):
			return fmt.Errorf("%s exited (%s) before it answered%s", what, ee.ProcessState, stderr)
		case exit == nil && started:
			return fmt.Errorf("%s exited (exit status 0) before it answered%s", what, stderr)
		}
		return fmt.Errorf("%s did not start: %w%s", what, err, stderr)
	}
	hint := ""
	if p := srv.s.sandbox.Policy(); p.Mode != sandbox.Off && !p.AllowNet {
		hint = fmt.Sprintf(": it runs sandboxed (%s) without network, so a server that downloads a package first (npx -y, uvx) hangs: install it first (npm i -g PACKAGE) or pass --allow-net", p.Mode)
	}
	return fmt.Errorf("%s did not answer within %s (--mcp-start-timeout)%s%s", what, srv.s.opts.MCPStart, hint, stderr)
}

// keptTransport is the SDK's command transport that keeps the connection
// it makes: closing it again returns what closing it first did, the
// server's exit (an *exec.ExitError, or nil for status 0).
type keptTransport struct {
	mcp.CommandTransport
	conn mcp.Connection
}

func (t *keptTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.CommandTransport.Connect(ctx)
	t.conn = c
	return c, err
}

// mcpClient is the client pg-tool connects to servers as.
func mcpClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "pg-tool", Version: "1"}, nil)
}

// closeStdio shuts the server down: stdin closed, then SIGTERM and SIGKILL
// after a grace (the SDK's transport), then whatever is left of its
// process group is killed. With kill, the group is killed first: a server
// that hangs gets no grace.
func (srv *mcpServer) closeStdio(kill bool) error {
	// The SDK reaps the server when the connection closes, which it may
	// do by itself when the server dies: its group is signalled only
	// through checks that cannot reach a group that reused its id (the
	// server still alive with its start time; a member seen before the
	// close still alive in the group).
	lead := proc.Target{PID: srv.cmd.Process.Pid, Start: srv.start}
	if kill {
		_, _ = proc.Default.SignalGroup(lead, syscall.SIGKILL)
	}
	members := proc.GroupOf(lead)
	err := srv.cs.Close()
	_, _ = proc.Default.SignalLeftovers(lead.PID, members, syscall.SIGKILL)
	srv.cs, srv.cmd, srv.tools = nil, nil, nil
	if kill {
		return nil
	}
	if err != nil && !isClosedErr(err) {
		return fmt.Errorf("mcp server %s: shutdown: %w", srv.name, err)
	}
	return nil
}

func isClosedErr(err error) bool {
	var ee *exec.ExitError
	// A child that kept the server's pipes open after it exited (ErrWaitDelay,
	// ErrProcessDone) is killed with the process group: no shutdown error.
	return errors.As(err, &ee) || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, exec.ErrWaitDelay) || errors.Is(err, os.ErrProcessDone)
}

// PID of the running server process, 0 when none (tests kill it).
func (srv *mcpServer) pid() int {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.cmd == nil || srv.cmd.Process == nil {
		return 0
	}
	return srv.cmd.Process.Pid
}

type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	mid    bool
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []byte
	for _, c := range b {
		if !p.mid {
			out = append(out, p.prefix...)
			p.mid = true
		}
		out = append(out, c)
		if c == '\n' {
			p.mid = false
		}
	}
	_, err := p.w.Write(out)
	return len(b), err
}

// stderrTail keeps the last non-blank line written to it, at most 300
// bytes of it, for an error message.
type stderrTail struct {
	mu   sync.Mutex
	cur  []byte // the line being written
	last string
}

func (l *stderrTail) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range b {
		if c == '\n' {
			l.end()
			continue
		}
		if len(l.cur) < 300 {
			l.cur = append(l.cur, c)
		}
	}
	return len(b), nil
}

func (l *stderrTail) end() {
	if line := strings.TrimSpace(string(l.cur)); line != "" {
		l.last = line
	}
	l.cur = l.cur[:0]
}

// String is the last line, an unfinished one included.
func (l *stderrTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.end()
	return l.last
}
