package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/powerglide/powerglide/pkg/internal/testnet"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// httpMCP is an MCP server of the Go SDK served over HTTP on 127.0.0.1,
// reached through a TCP proxy that can cut every connection: tools echo,
// whoami (the Authorization header it got), drop (cuts the connections
// mid-call) and silent (its answer stream ends without the answer).
type httpMCP struct {
	URL       string
	inits     atomic.Int32 // initialize requests: one per session
	sawGET    atomic.Int32
	proxy     *cutProxy
	backend   *httptest.Server
	sseOnly   bool
	needAuth  string // when set, requests without this Authorization get 401
	silentHit atomic.Int32
}

func newHTTPMCP(t *testing.T, sseOnly bool, needAuth string) *httpMCP {
	t.Helper()
	h := &httpMCP{sseOnly: sseOnly, needAuth: needAuth}
	server := mcp.NewServer(&mcp.Implementation{Name: "test-http", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "echo", InputSchema: objSchema(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("echo: " + string(req.Params.Arguments)), nil
		})
	server.AddTool(&mcp.Tool{Name: "whoami", InputSchema: objSchema(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("authorization: " + req.Extra.Header.Get("Authorization")), nil
		})
	server.AddTool(&mcp.Tool{Name: "drop", InputSchema: objSchema(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			h.proxy.cutAll()
			return textResult("never seen"), nil
		})
	server.AddTool(&mcp.Tool{Name: "silent", InputSchema: objSchema(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("never seen either"), nil
		})
	var handler http.Handler
	if sseOnly {
		handler = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil)
	} else {
		handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	}
	h.backend = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.needAuth != "" && r.Header.Get("Authorization") != h.needAuth {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet {
			h.sawGET.Add(1)
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"method":"initialize"`)) {
				h.inits.Add(1)
			}
			// silent: the answer stream opens and ends with no answer in it.
			if bytes.Contains(body, []byte(`"name":"silent"`)) && !sseOnly {
				h.silentHit.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				return
			}
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(h.backend.Close)
	h.proxy = newCutProxy(t, h.backend.Listener.Addr().String())
	h.URL = "http://" + h.proxy.addr() + "/mcp"
	return h
}

func objSchema(s string) any { return json.RawMessage(s) }

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// cutProxy forwards TCP connections to a backend and can cut them all.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, backend string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.cutAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, b)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(b, c); b.Close() }()
			go func() { _, _ = io.Copy(c, b); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func httpSession(t *testing.T, opts Options) *Session {
	t.Helper()
	if opts.Root == "" {
		opts.Root = t.TempDir()
	}
	s, err := NewSession(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func callJSON(s *Session, name, input string) Outcome {
	return s.Call(context.Background(), protocol.ToolCall{ID: name, Name: name, Input: []byte(input)})
}

// TestMCPHTTPStreamable: a streamable HTTP server is listed and called;
// a server that drops the connection mid-call gives a clean tool error at
// once, and the next call connects again; so does an answer stream that
// ends without the answer (which the SDK alone would wait on for the
// whole --mcp-timeout).
func TestMCPHTTPStreamable(t *testing.T) {
	h := newHTTPMCP(t, false, "")
	s := httpSession(t, Options{MCP: []string{"web=" + h.URL}, MCPTimeout: time.Minute})
	tools, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		if strings.HasPrefix(tl.Name, "mcp__") {
			names = append(names, tl.Name)
		}
	}
	if strings.Join(names, ",") != "mcp__web__drop,mcp__web__echo,mcp__web__silent,mcp__web__whoami" {
		t.Fatalf("tools: %v", names)
	}
	if r := callJSON(s, "mcp__web__echo", `{"message":"one"}`); !r.OK || r.Output != `echo: {"message":"one"}` || !r.Untrusted {
		t.Fatalf("echo: %+v", r.ToolResult)
	}
	if n := h.inits.Load(); n != 1 {
		t.Fatalf("%d sessions, want 1", n)
	}

	start := time.Now()
	r := callJSON(s, "mcp__web__drop", `{}`)
	if r.OK || r.Error == nil || !strings.Contains(*r.Error, "mcp server web: drop: the connection was lost during the call") ||
		!strings.Contains(*r.Error, "it will be opened again on the next call") {
		t.Fatalf("drop: %+v %s", r.ToolResult, *r.Error)
	}
	t.Logf("dropped call failed after %s: %s", time.Since(start), *r.Error)
	if r := callJSON(s, "mcp__web__echo", `{"message":"two"}`); !r.OK || r.Output != `echo: {"message":"two"}` {
		t.Fatalf("echo after the drop: %+v", r.ToolResult)
	}
	if n := h.inits.Load(); n != 2 {
		t.Fatalf("%d sessions after the drop, want 2", n)
	}

	start = time.Now()
	r = callJSON(s, "mcp__web__silent", `{}`)
	if r.OK || r.Error == nil || !strings.Contains(*r.Error, "mcp server web: silent: the connection was lost during the call (") ||
		!strings.Contains(*r.Error, "request terminated without response") {
		t.Fatalf("silent: %+v %s", r.ToolResult, *r.Error)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the lost answer took %s to notice", d)
	}
	if r := callJSON(s, "mcp__web__echo", `{"message":"three"}`); !r.OK {
		t.Fatalf("echo after the silent stream: %+v", r.ToolResult)
	}
	if n := h.inits.Load(); n != 3 {
		t.Fatalf("%d sessions after the silent stream, want 3", n)
	}
}

// TestMCPHTTPSSEFallback: a server offering only the legacy HTTP+SSE
// transport is reached through it after its 4xx to the streamable POST.
func TestMCPHTTPSSEFallback(t *testing.T) {
	h := newHTTPMCP(t, true, "")
	s := httpSession(t, Options{MCP: []string{"old=" + h.URL}})
	if r := callJSON(s, "mcp__old__echo", `{"message":"sse"}`); !r.OK || r.Output != `echo: {"message":"sse"}` {
		t.Fatalf("echo over SSE: %+v %s", r.ToolResult, *r.Error)
	}
	if h.sawGET.Load() == 0 {
		t.Fatal("the SSE stream was never opened")
	}
	// A dropped SSE stream is a clean error too, and the next call connects again.
	r := callJSON(s, "mcp__old__drop", `{}`)
	if r.OK || r.Error == nil || !strings.Contains(*r.Error, "mcp server old: drop: the connection was lost during the call") {
		t.Fatalf("drop over SSE: %+v", r.ToolResult)
	}
	if r := callJSON(s, "mcp__old__echo", `{"message":"again"}`); !r.OK {
		t.Fatalf("echo after the drop: %+v", r.ToolResult)
	}
}

// TestMCPHTTPHeaders: headers go with every request, ${NAME} is read from
// the environment, and the values never show in a result; without them
// the server's 401 is a clear error.
func TestMCPHTTPHeaders(t *testing.T) {
	const token = "tok-3f9a8c2e1d7b6a5f"
	h := newHTTPMCP(t, false, "Bearer "+token)
	s := httpSession(t, Options{
		MCP:        []string{"gh=" + h.URL},
		MCPHeaders: []MCPHeader{{Server: "gh", Key: "Authorization", Value: "Bearer ${GH_TEST_CRED}"}},
		Env:        []string{"GH_TEST_CRED=" + token},
	})
	r := callJSON(s, "mcp__gh__whoami", `{}`)
	if !r.OK || strings.Contains(r.Output, token) || r.Output != "authorization: [redacted:mcp_headers.gh.Authorization]" {
		t.Fatalf("whoami: %+v", r.ToolResult)
	}
	r = callJSON(s, "mcp__gh__echo", `{"message":"`+token+`"}`)
	if !r.OK || strings.Contains(r.Output, token) {
		t.Fatalf("echo of the token: %+v", r.ToolResult)
	}

	noAuth := httpSession(t, Options{MCP: []string{"gh=" + h.URL}})
	r = callJSON(noAuth, "mcp__gh__whoami", `{}`)
	if r.OK || r.Kind != KindUnavailable || r.Error == nil || !strings.Contains(*r.Error, "HTTP 401 Unauthorized: check its headers (--mcp-header gh:Authorization=...") {
		t.Fatalf("without the header: %+v", r.ToolResult)
	}

	unset := httpSession(t, Options{
		MCP:        []string{"gh=" + h.URL},
		MCPHeaders: []MCPHeader{{Server: "gh", Key: "Authorization", Value: "Bearer ${GH_NOT_SET}"}},
		Env:        []string{},
	})
	r = callJSON(unset, "mcp__gh__whoami", `{}`)
	if r.OK || r.Error == nil || !strings.Contains(*r.Error, "header Authorization names the environment variable GH_NOT_SET, which is not set") {
		t.Fatalf("unset variable: %+v", r.ToolResult)
	}
}

// TestMCPHTTPSpecs: what --mcp and --mcp-header refuse.
func TestMCPHTTPSpecs(t *testing.T) {
	for _, tc := range []struct {
		specs   []string
		headers []string
		want    string
	}{
		{[]string{"x=http://example.com/mcp"}, nil, "plain http:// is allowed on loopback only"},
		{[]string{"x=http://10.0.0.1:8080/mcp"}, nil, "plain http:// is allowed on loopback only"},
		{[]string{"x=https://user:pw@example.com/mcp"}, nil, "credentials in the URL are refused"},
		{[]string{"x=https:///mcp"}, nil, "bad MCP server URL for x"},
		{[]string{"x=https://example.com/mcp"}, []string{"y:A=b"}, `MCP header for "y": no MCP server of that name (servers: x)`},
		{[]string{"x=cat"}, []string{"x:A=b"}, "that server runs a command (cat); headers are for servers reached over HTTP"},
		{[]string{"x=https://example.com/mcp"}, []string{"x:Bad Name=b"}, `"Bad Name" is no valid header name`},
		{[]string{"x=https://example.com/mcp"}, []string{"x:A=line\nbreak"}, "the value holds a line break"},
	} {
		var hs []MCPHeader
		for _, spec := range tc.headers {
			h, err := ParseMCPHeader(spec)
			if err != nil {
				t.Fatalf("%s: %v", spec, err)
			}
			hs = append(hs, h)
		}
		_, err := NewSession(Options{Root: t.TempDir(), MCP: tc.specs, MCPHeaders: hs})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: got %v, want %q", tc.specs, tc.headers, err, tc.want)
		}
	}
	for _, ok := range []string{"x=http://127.0.0.1:1/mcp", "x=http://[::1]:1/mcp", "x=http://localhost:1/mcp", "x=https://example.com/mcp"} {
		s, err := NewSession(Options{Root: t.TempDir(), MCP: []string{ok}})
		if err != nil {
			t.Errorf("%s: %v", ok, err)
			continue
		}
		s.Close()
	}
	for _, bad := range []string{"x", "x:Authorization", ":A=b", "x:=b"} {
		if _, err := ParseMCPHeader(bad); err == nil {
			t.Errorf("ParseMCPHeader(%q) accepted it", bad)
		}
	}
	if _, err := ParseMCPHeader("x:A=secret-value"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseMCPHeader("nocolon=secret-value"); err == nil || strings.Contains(err.Error(), "secret-value") {
		t.Errorf("a bad spec's error shows its value: %v", err)
	}
}

// TestMCPHTTPHeadersStayHome: a redirect to another host gets no header.
func TestMCPHTTPHeadersStayHome(t *testing.T) {
	var leaked atomic.Value
	leaked.Store("")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("X-Test-Auth"))
		http.Error(w, "not here", http.StatusNotFound)
	}))
	defer other.Close()
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer home.Close()
	s := httpSession(t, Options{
		MCP:        []string{"r=" + home.URL + "/mcp"},
		MCPHeaders: []MCPHeader{{Server: "r", Key: "X-Test-Auth", Value: "header-value-1234"}},
	})
	if r := callJSON(s, "mcp__r__echo", `{}`); r.OK {
		t.Fatalf("call through a redirect to a 404: %+v", r.ToolResult)
	}
	if v := leaked.Load().(string); v != "" {
		t.Fatalf("the redirect target got the header: %q", v)
	}
}

// TestMCPHTTPQueryNotShown: a query value whose name does not look secret
// (?sig=) stays out of the messages of a server that cannot be reached,
// though the transport's errors quote the whole URL.
func TestMCPHTTPQueryNotShown(t *testing.T) {
	addr, release, err := testnet.Refused()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	s, err := NewSession(Options{Root: t.TempDir(), MCP: []string{"web=http://" + addr + "/mcp?sig=q7Hy2sigvalue"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Tools(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("want a connect error, got %v", err)
	}
	if strings.Contains(err.Error(), "q7Hy2sigvalue") {
		t.Errorf("the query's value is in the message: %v", err)
	}
}
