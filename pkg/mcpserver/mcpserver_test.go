package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/powerglide/powerglide/pkg/tool"
)

// connect serves a session to an in-process MCP client (the SDK's own
// client, over the SDK's in-memory transport) and returns the client.
func connect(t *testing.T, opts tool.Options) *mcp.ClientSession {
	t.Helper()
	s, err := tool.NewSession(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, ct := mcp.NewInMemoryTransports()
	srv := New(ctx, s, "test", io.Discard)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); <-done })
	return cs
}

func names(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, *mcp.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks, want 1", name, len(res.Content))
	}
	return res.Content[0].(*mcp.TextContent).Text, res
}

// TestServeTools: the built-in tools (term_* included) are listed with
// their schemas, calls run confined to the root, a failure is an MCP tool
// error with the same text pg-loop shows, and bash's directory persists.
func TestServeTools(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, tool.Options{Root: root, PersistCwd: true})
	got := names(t, cs)
	for _, want := range []string{"bash", "read", "write", "edit", "glob", "grep", "ls", "term_start", "term_send", "term_read", "term_screen", "term_kill"} {
		if !slices.Contains(got, want) {
			t.Errorf("tools/list lacks %s: %v", want, got)
		}
	}
	res, _ := cs.ListTools(context.Background(), nil)
	for _, tl := range res.Tools {
		schema, _ := json.Marshal(tl.InputSchema)
		if !strings.Contains(string(schema), `"type":"object"`) {
			t.Errorf("%s: input schema %s", tl.Name, schema)
		}
		if ro := tl.Annotations != nil && tl.Annotations.ReadOnlyHint; ro != (tl.Name == "read" || tl.Name == "glob" || tl.Name == "grep" || tl.Name == "ls" || tl.Name == "term_read" || tl.Name == "term_screen") {
			t.Errorf("%s: readOnlyHint %v", tl.Name, ro)
		}
	}

	text, r := call(t, cs, "read", map[string]any{"path": "a.txt"})
	if r.IsError || text != "     1\thello\n" {
		t.Errorf("read: %q, isError %v", text, r.IsError)
	}
	if r.Meta[MetaTruncated] != false || r.Meta[MetaSandbox] != "off" {
		t.Errorf("read meta: %v", r.Meta)
	}

	text, r = call(t, cs, "read", map[string]any{"path": "../outside"})
	if !r.IsError || !strings.Contains(text, "outside the workspace root") {
		t.Errorf("read outside: %q, isError %v", text, r.IsError)
	}
	text, r = call(t, cs, "read", map[string]any{"path": "a.txt", "nope": 1})
	if !r.IsError || !strings.Contains(text, `invalid input for read: unknown field "nope"`) {
		t.Errorf("bad input: %q, isError %v", text, r.IsError)
	}

	// A failing command: the error first, then the output (protocol.ToolResult.Text).
	text, r = call(t, cs, "bash", map[string]any{"command": "mkdir -p sub && cd sub && echo out; exit 3"})
	if !r.IsError || !strings.HasPrefix(text, "command exited with code 3\nout\n") {
		t.Errorf("bash: %q, isError %v", text, r.IsError)
	}
	text, _ = call(t, cs, "bash", map[string]any{"command": "pwd"})
	if !strings.HasPrefix(text, filepath.Join(root, "sub")+"\n") {
		t.Errorf("bash cwd did not persist: %q", text)
	}
}

// TestServeTruncation: a capped output keeps its head and tail, and the
// result names the file with the whole of it, in the text and in _meta.
func TestServeTruncation(t *testing.T) {
	root := t.TempDir()
	out := t.TempDir()
	cs := connect(t, tool.Options{Root: root, MaxOutput: 500, OutputDir: out})
	text, r := call(t, cs, "bash", map[string]any{"command": "seq 1 5000"})
	if r.IsError || r.Meta[MetaTruncated] != true {
		t.Fatalf("isError %v, meta %v", r.IsError, r.Meta)
	}
	full, _ := r.Meta[MetaFullOutput].(string)
	if full == "" || !strings.HasPrefix(text, "1\n2\n") || !strings.Contains(text, "characters omitted") ||
		!strings.HasSuffix(text, "\n[output truncated; the whole output is in "+full+"]") {
		t.Errorf("text %q, full %q", text, full)
	}
	b, err := os.ReadFile(full)
	if err != nil || !strings.Contains(string(b), "\n4999\n5000\n") {
		t.Errorf("saved output: %v, %d bytes", err, len(b))
	}
}

// TestServeVetoAndPreset: the edit veto rolls a breaking edit back, and
// the readonly preset and --deny leave their tools out of the list and
// refuse calls to them.
func TestServeVetoAndPreset(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "status.txt"), []byte("ok\nversion 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, tool.Options{Root: root, Verify: "grep -qx ok status.txt"})
	text, r := call(t, cs, "edit", map[string]any{"path": "status.txt", "old_string": "ok", "new_string": "broken"})
	if !r.IsError || !strings.Contains(text, "rolled back") {
		t.Errorf("veto: %q, isError %v", text, r.IsError)
	}
	if _, r = call(t, cs, "edit", map[string]any{"path": "status.txt", "old_string": "version 1", "new_string": "version 2"}); r.IsError {
		t.Errorf("a good edit failed: %v", r.Content)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "status.txt")); string(b) != "ok\nversion 2\n" {
		t.Errorf("status.txt = %q", b)
	}

	ro := connect(t, tool.Options{Root: root, Preset: "readonly", Deny: []string{"grep"}})
	got := names(t, ro)
	for _, n := range []string{"bash", "write", "edit", "term_start", "grep"} {
		if slices.Contains(got, n) {
			t.Errorf("readonly/--deny list has %s: %v", n, got)
		}
	}
	if !slices.Contains(got, "read") {
		t.Errorf("readonly list lacks read: %v", got)
	}
	res, err := ro.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}})
	if err == nil && !res.IsError {
		t.Error("readonly served bash")
	}
}

// TestDefinitionSchema: MCP wants an object schema; one without a type
// gets it, one of another type becomes the empty object schema.
func TestDefinitionSchema(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"a":{"type":"string"}}}`},
		{`{"properties":{"a":{"type":"string"}}}`, `{"properties":{"a":{"type":"string"}},"type":"object"}`},
		{`{"type":"string"}`, `{"type":"object"}`},
		{``, `{"type":"object"}`},
	} {
		def := definition(&tool.Tool{Name: "x", Schema: json.RawMessage(tc.in)})
		if got := string(def.InputSchema.(json.RawMessage)); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestServeStdio: Serve speaks newline-delimited JSON-RPC on its streams,
// ends without error when the client closes its end, and warns about an
// MCP server that cannot start while serving the other tools.
func TestServeStdio(t *testing.T) {
	s, err := tool.NewSession(tool.Options{Root: t.TempDir(), MCP: []string{"dud=/nonexistent/server"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var log strings.Builder
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), s, inR, outW, "test", &log) }()
	answers := bufio.NewReader(outR)
	exchange := func(line, want string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if want == "" {
			return
		}
		got, err := answers.ReadString('\n')
		if err != nil || !strings.Contains(got, want) {
			t.Fatalf("sent %s\ngot %s (%v), want %s", line, got, err, want)
		}
	}
	exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`"serverInfo":{"name":"pg-tool","version":"test"}`)
	exchange(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "")
	exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo hi"}}}`, `"text":"hi\n[exit code: 0]\n"`)
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not end at the end of its input")
	}
	if !strings.Contains(log.String(), "pg-tool: warning: mcp server dud (/nonexistent/server) exited (exit status 127) before it answered") {
		t.Errorf("log: %q", log.String())
	}
}

// TestServeBadInput: a line that is no JSON-RPC message ends the session
// with an error naming the line.
func TestServeBadInput(t *testing.T) {
	s, err := tool.NewSession(tool.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := strings.NewReader("\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\nnot json\n")
	err = Serve(context.Background(), s, in, io.Discard, "test", io.Discard)
	if err == nil || !strings.HasPrefix(err.Error(), "mcp: line 3: ") {
		t.Fatalf("Serve: %v", err)
	}
}

// TestLineTransport: batches and long lines are read; a result is written
// as the SDK encoded it, other messages through the SDK's encoder.
func TestLineTransport(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	in := strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":"b","method":"ping"}]` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + long + `"}}`)
	var out strings.Builder
	conn, err := (&lineTransport{in: in, out: &out}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var got []string
	for {
		m, err := conn.Read(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		r := m.(*jsonrpc.Request)
		got = append(got, fmt.Sprintf("%v %s %d", r.ID.Raw(), r.Method, len(r.Params)))
	}
	if want := fmt.Sprintf("1 ping 0|b ping 0|2 tools/call %d", len(long)+11); strings.Join(got, "|") != want {
		t.Errorf("read %q, want %q", got, want)
	}
	id, _ := jsonrpc.MakeID("b")
	if err := conn.Write(ctx, &jsonrpc.Response{ID: id, Result: json.RawMessage(`{"content":[]}`)}); err != nil {
		t.Fatal(err)
	}
	id2, _ := jsonrpc.MakeID(float64(7))
	if err := conn.Write(ctx, &jsonrpc.Response{ID: id2, Error: &jsonrpc.Error{Code: -32601, Message: "no"}}); err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":"b","result":{"content":[]}}` + "\n" + `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}` + "\n"
	if out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
}
