package pgloop

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// coTools stands for a pg-tool serve coprocess: it can be started ahead of
// its first call and reports what it used.
type coTools struct{ started, closed bool }

func (t *coTools) List(context.Context) ([]protocol.ToolDef, error) { return nil, nil }
func (t *coTools) Call(_ context.Context, calls []protocol.ToolCall) ([]protocol.ToolResult, error) {
	out := make([]protocol.ToolResult, len(calls))
	for i, c := range calls {
		out[i] = protocol.ToolResult{Type: "result", ID: c.ID, Name: c.Name, OK: true}
	}
	return out, nil
}
func (t *coTools) Close() error { t.closed = true; return nil }
func (t *coTools) Start()       { t.started = true }
func (t *coTools) Usage() (protocol.ProcessUsage, bool) {
	return protocol.ProcessUsage{Component: "tools", Processes: 1, MaxRSSKB: 12345}, true
}

// fakePty puts a pg-pty on PATH that notes each run in a file.
func fakePty(t *testing.T) (ran string) {
	dir := t.TempDir()
	ran = filepath.Join(dir, "ran")
	script := "#!/bin/sh\necho \"$*\" >> " + ran + "\necho '{\"name\":\"" + "s1.dev" + "\"}'\n"
	if err := os.WriteFile(filepath.Join(dir, "pg-pty"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return ran
}

// The scope's wrapper keeps what the runner asks of a coprocess: its start
// ahead of the first call, and its usage for the summary's resources
// (without them the summary lost the tools component and pg-tool serve
// was no longer started while the loop loads its tasks).
func TestScopedToolsIsStillTheCoprocess(t *testing.T) {
	ran := fakePty(t)
	inner := &coTools{}
	st := &scopedTools{Tools: inner, scope: "s1", env: os.Environ(), dir: t.TempDir(), stderr: io.Discard}
	// Asked as the runner asks (loop's start and resources).
	var component any = st
	if s, ok := component.(interface{ Start() }); ok {
		s.Start()
	}
	if !inner.started {
		t.Error("the coprocess was not started ahead of its first call")
	}
	co, ok := component.(interface {
		Usage() (protocol.ProcessUsage, bool)
	})
	if !ok {
		t.Fatal("no usage of the tools component for the summary's resources")
	}
	if u, ok := co.Usage(); !ok || u.Component != "tools" || u.MaxRSSKB != 12345 {
		t.Errorf("Usage = %+v, %v; want the coprocess's", u, ok)
	}
	if _, err := st.Call(context.Background(), []protocol.ToolCall{{ID: "1", Name: "bash"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if !inner.closed {
		t.Error("Close did not reach the coprocess")
	}
	// No term_start in the run: no pg-pty at its end.
	if _, err := os.Stat(ran); err == nil {
		b, _ := os.ReadFile(ran)
		t.Errorf("pg-pty ran at the end of a run that started no session: %s", b)
	}
}

// A run whose model started a terminal session ends the scope's sessions.
func TestScopedToolsEndsSessionsItStarted(t *testing.T) {
	ran := fakePty(t)
	st := &scopedTools{Tools: &coTools{}, scope: "s1", env: os.Environ(), dir: t.TempDir(), stderr: io.Discard}
	if _, err := st.Call(context.Background(), []protocol.ToolCall{{ID: "1", Name: "term_start"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ran)
	if err != nil {
		t.Fatalf("pg-pty did not run at the end: %v", err)
	}
	if want := "list --json\nclean --force s1.dev\n"; string(b) != want {
		t.Errorf("pg-pty ran with %q, want %q", b, want)
	}
}
