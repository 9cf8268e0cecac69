package tool

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

func newTestSession(t *testing.T, opts Options) *Session {
	t.Helper()
	s, err := NewSession(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// callWithin runs a call and fails the test, instead of hanging it, when
// the call does not come back in time.
func callWithin(t *testing.T, s *Session, d time.Duration, name, input string) Outcome {
	t.Helper()
	done := make(chan Outcome, 1)
	go func() {
		done <- s.Call(context.Background(), protocol.ToolCall{ID: "c", Name: name, Input: json.RawMessage(input)})
	}()
	select {
	case out := <-done:
		return out
	case <-time.After(d):
		t.Fatalf("%s %s did not return within %s", name, input, d)
		return Outcome{}
	}
}

// A FIFO, a socket or a device in the workspace is refused with a clear
// error; before, opening the FIFO blocked the call (and pg-tool serve)
// for ever.
func TestFileToolsRefuseSpecialFiles(t *testing.T) {
	root := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(root, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Symlink("/dev/zero", filepath.Join(root, "zero")); err != nil {
		t.Fatal(err)
	}
	s := newTestSession(t, Options{Root: root})
	cases := []struct{ tool, input, want string }{
		{"read", `{"path":"fifo"}`, "fifo is a named pipe (FIFO), not a regular file"},
		{"edit", `{"path":"fifo","old_string":"a","new_string":"b"}`, "fifo is a named pipe (FIFO), not a regular file"},
		{"write", `{"path":"fifo","content":"x"}`, "fifo is a named pipe (FIFO), not a regular file"},
		{"read", `{"path":"sock"}`, "sock is a socket or a device, not a regular file"},
		{"edit", `{"path":"sock","old_string":"a","new_string":"b"}`, "not a regular file"},
		{"read", `{"path":"` + filepath.Join(root, "fifo") + `"}`, "named pipe"},
	}
	for _, c := range cases {
		out := callWithin(t, s, 10*time.Second, c.tool, c.input)
		if out.OK || out.Error == nil || !strings.Contains(*out.Error, c.want) {
			t.Errorf("%s %s: ok=%v error=%v, want an error containing %q", c.tool, c.input, out.OK, out.Error, c.want)
		}
	}
	// /dev/zero is outside the root: confinement refuses it first.
	if out := callWithin(t, s, 10*time.Second, "read", `{"path":"zero"}`); out.OK {
		t.Errorf("read of a symlink to /dev/zero succeeded")
	}
	// With a verify command, write and edit read the old content first.
	sv := newTestSession(t, Options{Root: root, Verify: "true"})
	if out := callWithin(t, sv, 10*time.Second, "write", `{"path":"fifo","content":"x"}`); out.OK {
		t.Errorf("write over a FIFO with --verify succeeded")
	}
	if fi, err := os.Lstat(filepath.Join(root, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", fi, err)
	}
}

// A device reached inside the root (a bind mount, a container's /dev) is
// refused on the opened descriptor: the root here is / itself.
func TestReadRefusesDevice(t *testing.T) {
	s := newTestSession(t, Options{Root: "/dev"})
	out := callWithin(t, s, 10*time.Second, "read", `{"path":"zero"}`)
	if out.OK || !strings.Contains(*out.Error, "zero is a character device, not a regular file") {
		t.Errorf("read /dev/zero: ok=%v error=%v", out.OK, out.Error)
	}
}

// A cancelled Serve ends within its grace period even when a call ignores
// the cancellation; before, it waited for the call for ever, so the first
// SIGTERM to pg-tool serve did nothing.
func TestServeEndsWhenCancelledDuringAStuckCall(t *testing.T) {
	s := newTestSession(t, Options{Root: t.TempDir()})
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	stuck := &Tool{Name: "stuck", Run: func(ctx context.Context, s *Session, _ json.RawMessage) (string, error) {
		close(started)
		<-release // deaf to ctx, as a blocking open(2) is
		return "", nil
	}}
	s.builtins[stuck.Name] = stuck
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	defer pw.Close()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, pr, io.Discard, 1) }()
	go pw.Write([]byte(`{"id":"1","name":"stuck","input":{}}` + "\n"))
	<-started
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Serve returned nil after cancellation")
		}
	case <-time.After(serveGrace + 10*time.Second):
		t.Fatal("Serve did not return after its context was cancelled")
	}
}

// A read that is cancelled stops: the context reaches the read loop.
func TestReadHonoursCancellation(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "big.txt"), []byte(strings.Repeat("line\n", 100000)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newTestSession(t, Options{Root: root})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := s.Call(ctx, protocol.ToolCall{ID: "c", Name: "read", Input: json.RawMessage(`{"path":"big.txt"}`)})
	if out.OK || !strings.Contains(*out.Error, "cancelled") {
		t.Errorf("read with a cancelled context: ok=%v error=%v", out.OK, out.Error)
	}
}

// A FIFO named .gitignore (or .git/info/exclude) does not hang glob or
// grep: ignore files are read only when regular.
func TestSearchSkipsSpecialIgnoreFiles(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"sub", ".git/info"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{".gitignore", ".git/info/exclude", "sub/.gitignore"} {
		if err := syscall.Mkfifo(filepath.Join(root, p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "sub", "a.txt"), []byte("needle\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newTestSession(t, Options{Root: root})
	if out := callWithin(t, s, 10*time.Second, "glob", `{"pattern":"**/*.txt","path":"sub"}`); !out.OK || !strings.Contains(out.Output, "a.txt") {
		t.Errorf("glob: ok=%v output=%q error=%v", out.OK, out.Output, out.Error)
	}
	if out := callWithin(t, s, 10*time.Second, "grep", `{"pattern":"needle"}`); !out.OK || !strings.Contains(out.Output, "a.txt") {
		t.Errorf("grep: ok=%v output=%q error=%v", out.OK, out.Output, out.Error)
	}
}
