package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/powerglide/powerglide/pkg/proc"
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
	cmd.Stderr = &prefixWriter{w: srv.s.opts.Log, prefix: "mcp " + srv.name + ": "}
	// Its own process group: stopping the server kills what it started
	// too (npx runs the real server as a child).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A child that keeps stderr open must not hold up Wait.
	cmd.WaitDelay = time.Second
	cs, err := mcpClient().Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
	if err != nil {
		// The SDK may have reaped it already (closing the failed
		// connection): its group is killed only while it is not, which
		// the pidfd of the os.Process tells.
		if cmd.Process != nil && cmd.Process.Signal(syscall.Signal(0)) == nil {
			_, _ = proc.Adopt(cmd).SignalGroup(syscall.SIGKILL)
			_ = cmd.Wait()
		}
		return nil, fmt.Errorf("mcp server %s (%s) did not start: %w", srv.name, srv.cmdline, err)
	}
	srv.cmd = cmd
	srv.start, _ = proc.StartTime(cmd.Process.Pid)
	return cs, nil
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
