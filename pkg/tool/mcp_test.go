package tool

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/internal/testenv"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// mcpBin is where scripts/test-deps.sh installs the npm MCP servers.
func mcpBin(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "mcp", "node_modules", ".bin"))
	if _, err := os.Stat(filepath.Join(dir, "mcp-server-everything")); err != nil {
		if os.Getenv("POWERGLIDE_TEST_NO_NPM") == "1" {
			t.Skip("POWERGLIDE_TEST_NO_NPM=1: the npm MCP test servers are not used")
		}
		if _, nerr := exec.LookPath("npm"); nerr != nil {
			t.Fatal("npm is not installed, so the MCP test servers are missing: install nodejs/npm and run scripts/test-deps.sh, or set POWERGLIDE_TEST_NO_NPM=1 to skip these tests")
		}
		t.Fatalf("MCP test servers not installed in %s: run scripts/test-deps.sh, or set POWERGLIDE_TEST_NO_NPM=1 to skip these tests", dir)
	}
	return dir
}

func TestMCPServerDiesAndRestarts(t *testing.T) {
	bin := mcpBin(t)
	s, err := NewSession(Options{Root: t.TempDir(), MCP: []string{"ev=" + filepath.Join(bin, "mcp-server-everything") + " stdio"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	echo := func(msg string) Outcome {
		return s.Call(ctx, protocol.ToolCall{ID: msg, Name: "mcp__ev__echo", Input: []byte(`{"message":"` + msg + `"}`)})
	}
	if r := echo("one"); !r.OK || r.Output != "Echo: one" {
		t.Fatalf("first call: %+v", r)
	}
	srv := s.mcp.servers["ev"]
	pid := srv.pid()
	if pid == 0 {
		t.Fatal("no server process")
	}
	// The same process serves the next call: it started once.
	if r := echo("two"); !r.OK || srv.pid() != pid {
		t.Fatalf("second call: %+v (pid %d, was %d)", r, srv.pid(), pid)
	}
	// Kill the server; the next call reports it, the one after restarts it.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-srv.dead
	r := echo("three")
	if r.OK {
		// The death was seen before the call: it restarted at once.
		if srv.pid() == pid || srv.pid() == 0 {
			t.Fatalf("call after kill succeeded on the dead server?: %+v", r)
		}
	} else {
		if r.Error == nil || !strings.Contains(*r.Error, "mcp server ev") {
			t.Fatalf("call after kill: want a clear error, got %+v", r)
		}
		if r := echo("four"); !r.OK || r.Output != "Echo: four" {
			t.Fatalf("call after restart: %+v", r)
		}
	}
	if srv.pid() == pid {
		t.Fatal("server was not restarted")
	}
}

func TestMCPServerKilledDuringCall(t *testing.T) {
	bin := mcpBin(t)
	s, err := NewSession(Options{Root: t.TempDir(), MCP: []string{"ev=" + filepath.Join(bin, "mcp-server-everything") + " stdio"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	srv := s.mcp.servers["ev"]
	if _, err := srv.ensure(ctx); err != nil {
		t.Fatal(err)
	}
	pid := srv.pid()
	read := readBytes(pid)
	if read < 0 {
		t.Fatalf("/proc/%d/io of the server cannot be read: the test cannot tell when the call has reached it", pid)
	}
	// The kill comes once the server has read the call (it reads nothing
	// while idle: what it read grows by the request's size, over 100
	// bytes) and long before the operation would end.
	go func() {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if n := readBytes(pid); n < 0 || n-read >= 100 {
				break
			}
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}()
	// A long operation that the kill interrupts.
	r := s.Call(ctx, protocol.ToolCall{ID: "long", Name: "mcp__ev__trigger-long-running-operation", Input: []byte(`{"duration":30,"steps":30}`)})
	if r.OK || r.Error == nil || !strings.Contains(*r.Error, "mcp server ev died during the call") || !strings.Contains(*r.Error, "restarted on the next call") {
		t.Fatalf("want a died-during-the-call error, got %+v", r.ToolResult)
	}
	if r := s.Call(ctx, protocol.ToolCall{ID: "again", Name: "mcp__ev__echo", Input: []byte(`{"message":"back"}`)}); !r.OK || r.Output != "Echo: back" {
		t.Fatalf("after restart: %+v", r.ToolResult)
	}
}

func TestMCPShutdownIsClean(t *testing.T) {
	bin := mcpBin(t)
	s, err := NewSession(Options{Root: t.TempDir(), MCP: []string{"ev=" + filepath.Join(bin, "mcp-server-everything") + " stdio"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	pid := s.mcp.servers["ev"].pid()
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("server %d still running after Close", pid)
	}
	t.Logf("shutdown took %s", time.Since(start))
}

// readBytes is how many bytes pid has read so far (rchar in
// /proc/<pid>/io), -1 once it is gone.
func readBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	var n int64
	if err != nil {
		return -1
	}
	if _, err := fmt.Sscanf(string(b), "rchar: %d", &n); err != nil {
		return -1
	}
	return n
}

// hangServer is a python MCP server whose "hang" tool never answers, run
// behind a shell that stays its parent, as npx does.
func hangServer(t *testing.T) (spec, pidfile string) {
	t.Helper()
	testenv.Need(t, "the hanging MCP server is a python script", "python3")
	script, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "mcp", "hang_server.py"))
	pidfile = filepath.Join(t.TempDir(), "pids")
	return "h=env PIDFILE=" + pidfile + " sh -c 'python3 " + script + "; echo ended'", pidfile
}

// readPids returns the server's and its child's pid from the latest start.
func readPids(t *testing.T, pidfile string) (server, child int) {
	t.Helper()
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if _, err := fmt.Sscan(lines[len(lines)-1], &server, &child); err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	return server, child
}

// gone reports whether pid has exited (a zombie counts as gone).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !gone(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still running", what, pid)
		}
	}
}

// A call the server never answers times out: ok:false with a clear error,
// the server's whole process group is killed, and the next call starts it
// again.
func TestMCPCallTimeout(t *testing.T) {
	spec, pidfile := hangServer(t)
	s, err := NewSession(Options{Root: t.TempDir(), MCP: []string{spec}, MCPTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	r := s.Call(ctx, protocol.ToolCall{ID: "1", Name: "mcp__h__echo", Input: []byte(`{"message":"hi"}`)})
	server, child := readPids(t, pidfile)
	if !r.OK || r.Output != fmt.Sprintf("pid %d: hi", server) {
		t.Fatalf("echo: %+v", r.ToolResult)
	}
	r = s.Call(ctx, protocol.ToolCall{ID: "2", Name: "mcp__h__hang", Input: []byte(`{}`)})
	if r.OK || r.Error == nil || *r.Error != "mcp server h: hang timed out after 1s (--mcp-timeout); the server was stopped and will be restarted on the next call" {
		t.Fatalf("hang: %+v", r.ToolResult)
	}
	waitGone(t, "server", server)
	waitGone(t, "server's child", child)
	r = s.Call(ctx, protocol.ToolCall{ID: "3", Name: "mcp__h__echo", Input: []byte(`{"message":"again"}`)})
	server2, child2 := readPids(t, pidfile)
	if !r.OK || server2 == server || r.Output != fmt.Sprintf("pid %d: again", server2) {
		t.Fatalf("echo after the timeout: %+v (server %d, was %d)", r.ToolResult, server2, server)
	}
	// Close kills the process group too.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "server after close", server2)
	waitGone(t, "server's child after close", child2)
}

// A server that cannot start is reported in one line that says why: its
// exit status and last line on stderr as soon as it exits (the start
// timeout here is long, so an error that waited for it would say so), or
// that it did not answer within the start timeout.
func TestMCPStartFailures(t *testing.T) {
	for _, tc := range []struct {
		name, cmd string
		start     time.Duration
		want      string
	}{
		{"exits", `sh -c 'echo fetching >&2; echo npm error network >&2; exit 7'`, 10 * time.Minute,
			`mcp server x (sh -c 'echo fetching >&2; echo npm error network >&2; exit 7') exited (exit status 7) before it answered; its last line on stderr: npm error network`},
		{"exits quietly", `true`, 10 * time.Minute,
			`mcp server x (true) exited (exit status 0) before it answered`},
		{"killed", `sh -c 'printf "half a line" >&2; kill -9 $$'`, 10 * time.Minute,
			`mcp server x (sh -c 'printf "half a line" >&2; kill -9 $$') exited (signal: killed) before it answered; its last line on stderr: half a line`},
		{"not found", `no-such-mcp-server`, 10 * time.Minute,
			`mcp server x (no-such-mcp-server) exited (exit status 127) before it answered; its last line on stderr: bash: line 1: exec: no-such-mcp-server: not found`},
		// Unconfined: no word of the sandbox's network.
		{"silent", `sh -c 'echo downloading >&2; exec sleep 60'`, 300 * time.Millisecond,
			`mcp server x (sh -c 'echo downloading >&2; exec sleep 60') did not answer within 300ms (--mcp-start-timeout); its last line on stderr: downloading`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSession(Options{Root: t.TempDir(), MCP: []string{"x=" + tc.cmd}, MCPStart: tc.start})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			_, err = s.Tools(context.Background())
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
}
