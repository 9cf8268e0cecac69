package agent_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/agent"
	"github.com/powerglide/powerglide/pkg/store/dial"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
	"github.com/powerglide/powerglide/pkg/store/remote"
	"github.com/powerglide/powerglide/pkg/store/storetest"
)

// The test binary is also the agent the tests start (agentEnv set), as
// pg-queue agent is in real use: the same agent.Serve over dial.
const (
	agentEnv = "AGENTTEST_SERVE"
	homeEnv  = "AGENTTEST_HOME"
	idleEnv  = "AGENTTEST_IDLE"
	dialEnv  = "AGENTTEST_DIAL"
	// commandEnv makes the test binary a first command (TestAutoStartRace).
	commandEnv = "AGENTTEST_COMMAND"
	// pipeWorkersEnv makes the suite's worker processes use openPipe.
	pipeWorkersEnv = "AGENTTEST_PIPE_WORKERS"
	// socketPathEnv makes the test binary print the socket path of a URL
	// under $AGENTTEST_HOME, as seen from its host (TestHostsGetAgentsOfTheirOwn).
	socketPathEnv = "AGENTTEST_SOCKET_PATH"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(agentEnv) != "" && slices.Contains(os.Args, agent.StdioArg):
		os.Exit(serveStdio())
	case os.Getenv(agentEnv) != "":
		os.Exit(serveAgent())
	case os.Getenv(commandEnv) != "":
		os.Exit(firstCommand(os.Getenv(commandEnv)))
	case os.Getenv(dialEnv) != "":
		os.Exit(dialAs(os.Getenv(dialEnv)))
	case os.Getenv(socketPathEnv) != "":
		os.Exit(printSocketPath(os.Getenv(socketPathEnv)))
	case storetest.IsWorker() && os.Getenv(pipeWorkersEnv) != "":
		os.Exit(storetest.WorkerOpen(os.Stderr, openPipe))
	case storetest.IsWorker():
		os.Exit(storetest.WorkerOpen(os.Stderr, openAgent))
	}
	os.Exit(pgtest.Main(m))
}

// serveAgent is the agent process: POWERGLIDE_HOME and POWERGLIDE_STORE
// name what it serves, as Open sets them.
func serveAgent() int {
	idle, _ := time.ParseDuration(os.Getenv(idleEnv))
	url := os.Getenv("POWERGLIDE_STORE")
	ctx, stop := cli.SignalContext(context.Background()) // as pg-queue agent's
	defer stop()
	err := agent.Serve(ctx, agent.ServeOptions{
		Home: os.Getenv("POWERGLIDE_HOME"), URL: url, Env: os.Environ(), Idle: idle,
		Check: 100 * time.Millisecond, Log: os.Stderr,
		Ready: os.NewFile(agent.ReadyFD, "ready"),
		Open: func(ctx context.Context) (store.Store, error) {
			return dial.OpenContext(ctx, url, dial.Options{})
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 1
	}
	return 0
}

// serveStdio is a private agent on stdin and stdout, as pg-queue agent
// --stdio.
func serveStdio() int {
	st, err := dial.OpenContext(context.Background(), os.Getenv("POWERGLIDE_STORE"), dial.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 1
	}
	defer st.Close()
	if err := remote.Serve(context.Background(), struct {
		io.Reader
		io.Writer
	}{os.Stdin, os.Stdout}, st); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 1
	}
	return 0
}

// openPipe opens the store of url through a private agent on pipes.
func openPipe(url string) (store.Store, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return agent.OpenPipe(context.Background(), exe, []string{exe, "agent", agent.StdioArg}, append(os.Environ(), agentEnv+"=1", "POWERGLIDE_STORE="+url), os.Stderr)
}

// TestConformancePipe runs the suite through private agents on pipes (as
// pg-loop, which does not link pgx, reaches PostgreSQL with store_agent
// off).
func TestConformancePipe(t *testing.T) {
	t.Setenv(pipeWorkersEnv, "1")
	srv := pgtest.Start(t, pgtest.Options{})
	storetest.Run(t, storetest.Target{
		New:  func(t *testing.T) string { return srv.DB(t) },
		Open: openPipe,
		Restart: func(t *testing.T) {
			if err := srv.Restart(); err != nil {
				t.Fatalf("restart postgres: %v", err)
			}
		},
	})
}

// options reach the agent of url under the test's home ($AGENTTEST_HOME),
// starting this test binary as the agent.
func options(url string) agent.OpenOptions {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return agent.OpenOptions{
		Home: os.Getenv(homeEnv), URL: url, Env: append(os.Environ(), agentEnv+"=1"),
		Path: exe, Args: []string{exe},
	}
}

// openAgent opens the store of url through its agent, and only so: no
// direct fallback hides a broken agent path.
func openAgent(url string) (store.Store, error) {
	c, err := agent.Open(context.Background(), options(url))
	if err != nil {
		return nil, err
	}
	if c.Hello().PID == os.Getpid() {
		return nil, fmt.Errorf("the agent is this process")
	}
	return c, nil
}

// withHome gives the test a data root for its agents; removing it at the
// end makes them exit.
func withHome(t *testing.T, idle time.Duration) string {
	home := t.TempDir()
	t.Setenv(homeEnv, home)
	t.Setenv(idleEnv, idle.String())
	return home
}

// TestConformanceFiles runs the stores' conformance suite unchanged
// through agents serving the file store.
func TestConformanceFiles(t *testing.T) {
	withHome(t, 30*time.Second)
	storetest.Run(t, storetest.Target{
		New:  func(t *testing.T) string { return "file:" + t.TempDir() },
		Open: openAgent,
	})
}

// TestConformancePostgres runs it through agents serving PostgreSQL,
// with their pools of prepared statements.
func TestConformancePostgres(t *testing.T) {
	withHome(t, 30*time.Second)
	srv := pgtest.Start(t, pgtest.Options{})
	storetest.Run(t, storetest.Target{
		New:  func(t *testing.T) string { return srv.DB(t) },
		Open: openAgent,
		Restart: func(t *testing.T) {
			if err := srv.Restart(); err != nil {
				t.Fatalf("restart postgres: %v", err)
			}
		},
	})
}

// waitExit waits until process pid has exited (a pidfd becomes readable),
// failing after d.
func waitExit(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // already gone
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(d)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(time.Until(deadline)/time.Millisecond))
		if err == unix.EINTR && time.Now().Before(deadline) {
			continue // a signal (the Go runtime's preemption), not the exit
		}
		if err != nil || n == 0 {
			t.Fatalf("agent %d still running after %s (%v)", pid, d, err)
		}
		return
	}
}

func alive(pid int) bool { return unix.Kill(pid, 0) == nil && !zombie(pid) }

func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	for i := len(b) - 1; i > 0; i-- {
		if b[i] == ')' {
			return i+2 < len(b) && b[i+2] == 'Z'
		}
	}
	return false
}

func mustOpen(t *testing.T, o agent.OpenOptions) *remote.Client {
	t.Helper()
	c, err := agent.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// socketPath is the socket of the agent of url under home that the tests
// start (this test binary).
func socketPath(home, url string) string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return agent.SocketPath(home, url, os.Environ(), exe)
}
