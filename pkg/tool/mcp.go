package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/powerglide/powerglide/pkg/internal/lazyre"
)

// MCP servers: each "name=command args" spec is a server started (once, on
// first use) as a child over stdio with the official Go SDK; each
// "name=https://..." spec (http:// on loopback) is a server reached over
// HTTP (see mcp_http.go). Its tools appear as mcp__<name>__<tool>. A server
// that dies, or whose connection is lost, is reported in the failing
// call's result and started (or connected) again on the next call.

// DefaultMCPStart bounds a server's start and its tool list.
const DefaultMCPStart = 30 * time.Second

// DefaultMCPTimeout bounds one MCP tool call, like bash's longest timeout.
const DefaultMCPTimeout = 10 * time.Minute

// codeRejected is the SDK's error for a request its transport could not
// deliver or whose HTTP answer was an error status (it is not exported).
const codeRejected = -32005

var mcpNameRe = lazyre.Compile(`^[a-zA-Z0-9-]+(_[a-zA-Z0-9-]+)*$`)

type mcpManager struct {
	s       *Session
	servers map[string]*mcpServer
	order   []string
}

type mcpServer struct {
	name string
	s    *Session
	// Either a command run as a child over stdio, or an HTTP endpoint.
	cmdline string
	http    *httpEndpoint

	mu    sync.Mutex
	cs    *mcp.ClientSession
	cmd   *exec.Cmd     // the child of a stdio server
	start string        // the child's start time, read when it answered
	dead  chan struct{} // closed when the connection ends
	tools []*Tool
}

// ParseMCP splits a server spec, "name=command args" or "name=URL".
func ParseMCP(spec string) (name, target string, err error) {
	name, target, ok := strings.Cut(spec, "=")
	name, target = strings.TrimSpace(name), strings.TrimSpace(target)
	if !ok || name == "" || target == "" {
		return "", "", fmt.Errorf("bad MCP server %q: want name=command args or name=https://host/path", spec)
	}
	if !mcpNameRe().MatchString(name) {
		return "", "", fmt.Errorf("bad MCP server name %q: letters, digits, - and single _ only (tools are named mcp__%s__tool)", name, name)
	}
	return name, target, nil
}

func newMCPManager(s *Session, specs []string, headers []MCPHeader) (*mcpManager, error) {
	m := &mcpManager{s: s, servers: map[string]*mcpServer{}}
	for _, spec := range specs {
		name, target, err := ParseMCP(spec)
		if err != nil {
			return nil, err
		}
		if _, dup := m.servers[name]; dup {
			return nil, fmt.Errorf("MCP server %q given twice", name)
		}
		srv := &mcpServer{name: name, s: s}
		if isURL(target) {
			if srv.http, err = newHTTPEndpoint(name, target); err != nil {
				return nil, err
			}
		} else {
			srv.cmdline = target
		}
		m.servers[name] = srv
		m.order = append(m.order, name)
	}
	if err := m.setHeaders(headers); err != nil {
		return nil, err
	}
	return m, nil
}

// tools starts every server that is not running (at the same time) and
// lists all their tools, in the order the servers were given.
func (m *mcpManager) tools(ctx context.Context) ([]*Tool, error) {
	lists := make([][]*Tool, len(m.order))
	errs := make([]error, len(m.order))
	var wg sync.WaitGroup
	for i, name := range m.order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lists[i], errs[i] = m.servers[name].ensure(ctx)
		}()
	}
	wg.Wait()
	var out []*Tool
	for _, l := range lists {
		out = append(out, l...)
	}
	return out, errors.Join(errs...)
}

// lookup finds mcp__server__tool, starting that server if needed. An
// unknown server or tool yields (nil, nil); a server that cannot start, an error.
func (m *mcpManager) lookup(ctx context.Context, full string) (*Tool, error) {
	rest := strings.TrimPrefix(full, "mcp__")
	name, _, ok := strings.Cut(rest, "__")
	srv := m.servers[name]
	if !ok || srv == nil {
		return nil, nil
	}
	ts, err := srv.ensure(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.Name == full {
			return t, nil
		}
	}
	return nil, nil
}

func (m *mcpManager) close() error {
	var errs []error
	for _, name := range m.order {
		errs = append(errs, m.servers[name].stop(false))
	}
	return errors.Join(errs...)
}

// ensure connects to the server unless a live connection exists, and
// returns its tools.
func (srv *mcpServer) ensure(ctx context.Context) ([]*Tool, error) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.cs != nil {
		select {
		case <-srv.dead:
			srv.closeLocked(true)
		default:
			return srv.tools, nil
		}
	}
	if err := srv.startLocked(ctx); err != nil {
		return nil, err
	}
	return srv.tools, nil
}

// startLocked connects (starting a stdio server first) and lists the tools.
func (srv *mcpServer) startLocked(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, srv.s.opts.MCPStart)
	defer cancel()
	var cs *mcp.ClientSession
	var err error
	if srv.http != nil {
		cs, err = srv.http.connect(cctx, srv.s)
	} else {
		cs, err = srv.startStdio(cctx)
	}
	if err != nil {
		return err
	}
	dead := make(chan struct{})
	go func() { _ = cs.Wait(); close(dead) }()
	var tools []*Tool
	for t, err := range cs.Tools(cctx, nil) {
		if err != nil {
			_ = cs.Close()
			srv.cmd = nil
			return fmt.Errorf("mcp server %s: list tools: %w", srv.name, err)
		}
		tools = append(tools, srv.wrap(t))
	}
	srv.cs, srv.dead, srv.tools = cs, dead, tools
	return nil
}

// closeLocked ends the connection; kill: at once, for a server that
// hangs or died.
func (srv *mcpServer) closeLocked(kill bool) error {
	if srv.cs == nil {
		return nil
	}
	if srv.http == nil {
		return srv.closeStdio(kill)
	}
	err := srv.cs.Close()
	srv.cs, srv.tools = nil, nil
	if kill || err == nil || isClosedErr(err) {
		return nil
	}
	return fmt.Errorf("mcp server %s: close: %w", srv.name, err)
}

func (srv *mcpServer) stop(kill bool) error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.closeLocked(kill)
}

func (srv *mcpServer) wrap(t *mcp.Tool) *Tool {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || len(schema) == 0 || schema[0] != '{' {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	remote := t.Name
	return &Tool{
		Name:        "mcp__" + srv.name + "__" + t.Name,
		Description: t.Description,
		Schema:      schema,
		ReadOnly:    t.Annotations != nil && t.Annotations.ReadOnlyHint,
		Untrusted:   always,
		Run: func(ctx context.Context, s *Session, input json.RawMessage) (string, error) {
			return srv.call(ctx, remote, input)
		},
	}
}

func (srv *mcpServer) call(ctx context.Context, name string, input json.RawMessage) (string, error) {
	if _, err := srv.ensure(ctx); err != nil {
		return "", err
	}
	srv.mu.Lock()
	cs, dead := srv.cs, srv.dead
	srv.mu.Unlock()
	limit := srv.s.opts.MCPTimeout
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: input})
	if err != nil {
		return "", srv.callError(ctx, cctx, name, dead, err)
	}
	out := mcpText(res)
	if res.IsError {
		msg := strings.TrimSpace(out)
		if msg == "" {
			msg = "the tool reported an error"
		}
		return "", errors.New(msg)
	}
	return out, nil
}

// callError words a failed call. A server that does not answer in time,
// dies, or loses its connection is stopped (or disconnected) so that the
// next call starts (or connects) afresh.
func (srv *mcpServer) callError(ctx, cctx context.Context, name string, dead chan struct{}, err error) error {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && rpcErr.Code != codeRejected {
		return fmt.Errorf("mcp server %s: %s: %s", srv.name, name, rpcErr.Message)
	}
	if ctx.Err() != nil {
		return err
	}
	if cctx.Err() != nil {
		// A server that does not answer may never answer: stop it
		// (process group and all) and start afresh next time.
		_ = srv.stop(true)
		if srv.http != nil {
			return fmt.Errorf("mcp server %s: %s timed out after %s (--mcp-timeout); the connection was closed and will be opened again on the next call", srv.name, name, srv.s.opts.MCPTimeout)
		}
		return fmt.Errorf("mcp server %s: %s timed out after %s (--mcp-timeout); the server was stopped and will be restarted on the next call", srv.name, name, srv.s.opts.MCPTimeout)
	}
	if srv.http != nil {
		// Over HTTP every failure that is not the server's answer is the
		// connection's: the next call connects again.
		_ = srv.stop(true)
		return fmt.Errorf("mcp server %s: %s: the connection was lost during the call (%s); it will be opened again on the next call", srv.name, name, srv.http.scrub(err))
	}
	// Give the connection watcher a moment to notice a dead server.
	select {
	case <-dead:
	case <-time.After(200 * time.Millisecond):
	}
	select {
	case <-dead:
		_ = srv.stop(true)
		return fmt.Errorf("mcp server %s died during the call (%v); it will be restarted on the next call", srv.name, err)
	default:
	}
	return fmt.Errorf("mcp server %s: %s: %w", srv.name, name, err)
}

// mcpText renders a tool result's content for a model: text as is, other
// content as a short description, structured content as JSON.
func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		case *mcp.ImageContent:
			fmt.Fprintf(&b, "[image: %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(&b, "[audio: %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcp.ResourceLink:
			fmt.Fprintf(&b, "[resource link: %s", c.URI)
			if c.Name != "" {
				fmt.Fprintf(&b, " (%s)", c.Name)
			}
			if c.Description != "" {
				fmt.Fprintf(&b, ": %s", c.Description)
			}
			b.WriteString("]")
		case *mcp.EmbeddedResource:
			if c.Resource == nil {
				continue
			}
			if c.Resource.Text != "" {
				fmt.Fprintf(&b, "[resource %s]\n%s", c.Resource.URI, c.Resource.Text)
			} else {
				fmt.Fprintf(&b, "[resource %s: %s, %d bytes]", c.Resource.URI, c.Resource.MIMEType, len(c.Resource.Blob))
			}
		default:
			raw, _ := json.Marshal(c)
			b.Write(raw)
		}
	}
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil && !sameJSON(raw, b.String()) {
			if b.Len() > 0 {
				if !strings.HasSuffix(b.String(), "\n") {
					b.WriteByte('\n')
				}
				b.WriteString("[structured content]\n")
			}
			b.Write(raw)
		}
	}
	return b.String()
}

// sameJSON reports whether text is the JSON document raw (servers often
// send structured content twice, once as text).
func sameJSON(raw []byte, text string) bool {
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal([]byte(text), &b) != nil {
		return false
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
