package tool

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// MCP servers: each "name=command args" spec is a server started (once, on
// first use) as a child over stdio (see mcpconn.go). Its tools appear as
// mcp__<name>__<tool>. A server that dies is reported in the failing call's
// result and started again on the next call.

const mcpStartTimeout = 30 * time.Second

// DefaultMCPTimeout bounds one MCP tool call, like bash's longest timeout.
const DefaultMCPTimeout = 10 * time.Minute

var mcpNameRe = lazyRegexp(`^[a-zA-Z0-9-]+(_[a-zA-Z0-9-]+)*$`)

type mcpManager struct {
	s       *Session
	servers map[string]*mcpServer
	order   []string
}

type mcpServer struct {
	name    string
	cmdline string
	s       *Session

	mu    sync.Mutex
	conn  *mcpConn
	dead  chan struct{} // the connection's: closed when it ends
	tools []*Tool
}

// ParseMCP splits a "name=command args" server spec.
func ParseMCP(spec string) (name, cmdline string, err error) {
	name, cmdline, ok := strings.Cut(spec, "=")
	name, cmdline = strings.TrimSpace(name), strings.TrimSpace(cmdline)
	if !ok || name == "" || cmdline == "" {
		return "", "", fmt.Errorf("bad MCP server %q: want name=command args", spec)
	}
	if !mcpNameRe().MatchString(name) {
		return "", "", fmt.Errorf("bad MCP server name %q: letters, digits, - and single _ only (tools are named mcp__%s__tool)", name, name)
	}
	return name, cmdline, nil
}

func newMCPManager(s *Session, specs []string) (*mcpManager, error) {
	m := &mcpManager{s: s, servers: map[string]*mcpServer{}}
	for _, spec := range specs {
		name, cmdline, err := ParseMCP(spec)
		if err != nil {
			return nil, err
		}
		if _, dup := m.servers[name]; dup {
			return nil, fmt.Errorf("MCP server %q given twice", name)
		}
		m.servers[name] = &mcpServer{name: name, cmdline: cmdline, s: s}
		m.order = append(m.order, name)
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
	if srv.conn != nil {
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

func (srv *mcpServer) startLocked(ctx context.Context) error {
	cmd := exec.Command("bash", "-c", "exec "+srv.cmdline)
	cmd.Dir = srv.s.rootPath
	cmd.Env = srv.s.opts.Env
	log := &prefixWriter{w: srv.s.opts.Log, prefix: "mcp " + srv.name + ": "}
	cmd.Stderr = log
	c, err := startMCPConn(cmd, log)
	if err != nil {
		return fmt.Errorf("mcp server %s (%s) did not start: %w", srv.name, srv.cmdline, err)
	}
	cctx, cancel := context.WithTimeout(ctx, mcpStartTimeout)
	defer cancel()
	fail := func(format string, err error) error {
		if errors.Is(err, errServerGone) {
			err = errors.New(c.gone())
		}
		c.close(true)
		return fmt.Errorf(format, srv.name, srv.cmdline, err)
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	err = c.call(cctx, "initialize", map[string]any{
		"protocolVersion": mcpProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]string{"name": "pg-tool", "version": "1"},
	}, &init)
	if err == nil {
		err = c.notify("notifications/initialized", map[string]any{}, time.Now().Add(mcpStartTimeout))
	}
	if err != nil {
		return fail("mcp server %s (%s) did not start: %w", err)
	}
	var tools []*Tool
	cursor := ""
	for page := 0; page < 100; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var res struct {
			Tools      []mcpToolDef `json:"tools"`
			NextCursor string       `json:"nextCursor"`
		}
		if err := c.call(cctx, "tools/list", params, &res); err != nil {
			return fail("mcp server %s (%s): list tools: %w", err)
		}
		for _, t := range res.Tools {
			tools = append(tools, srv.wrap(t))
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	srv.conn, srv.dead, srv.tools = c, c.dead, tools
	return nil
}

// closeLocked stops the server (see mcpConn.close); kill skips the grace.
func (srv *mcpServer) closeLocked(kill bool) error {
	if srv.conn == nil {
		return nil
	}
	srv.conn.close(kill)
	srv.conn, srv.tools = nil, nil
	return nil
}

func (srv *mcpServer) stop(kill bool) error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.closeLocked(kill)
}

// PID of the running server process, 0 when none (tests kill it).
func (srv *mcpServer) pid() int {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.conn == nil {
		return 0
	}
	return srv.conn.cmd.Process.Pid
}

// mcpToolDef is a tool as tools/list describes it.
type mcpToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations *struct {
		ReadOnlyHint bool `json:"readOnlyHint"`
	} `json:"annotations"`
}

func (srv *mcpServer) wrap(t mcpToolDef) *Tool {
	var schema bytes.Buffer
	if json.Compact(&schema, t.InputSchema) != nil || schema.Len() == 0 || schema.Bytes()[0] != '{' {
		schema.Reset()
		schema.WriteString(`{"type":"object"}`)
	}
	remote := t.Name
	return &Tool{
		Name:        "mcp__" + srv.name + "__" + t.Name,
		Description: t.Description,
		Schema:      schema.Bytes(),
		ReadOnly:    t.Annotations != nil && t.Annotations.ReadOnlyHint,
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
	c := srv.conn
	srv.mu.Unlock()
	if c == nil {
		return "", fmt.Errorf("mcp server %s was stopped; it will be restarted on the next call", srv.name)
	}
	limit := srv.s.opts.MCPTimeout
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var res mcpCallResult
	err := c.call(cctx, "tools/call", map[string]any{"name": name, "arguments": input}, &res)
	if err != nil {
		var rpcErr *jsonrpc.Error
		switch {
		case errors.As(err, &rpcErr):
			return "", fmt.Errorf("mcp server %s: %s: %s", srv.name, name, rpcErr.Message)
		case ctx.Err() != nil:
			return "", err
		case cctx.Err() != nil:
			// A server that does not answer may never answer: stop it
			// (process group and all) and start afresh next time.
			_ = srv.stopConn(c, true)
			return "", fmt.Errorf("mcp server %s: %s timed out after %s (--mcp-timeout); the server was stopped and will be restarted on the next call", srv.name, name, limit)
		case errors.Is(err, errServerGone):
			why := c.gone()
			_ = srv.stopConn(c, true)
			return "", fmt.Errorf("mcp server %s died during the call (%s); it will be restarted on the next call", srv.name, why)
		}
		return "", fmt.Errorf("mcp server %s: %s: %w", srv.name, name, err)
	}
	out := mcpText(&res)
	if res.IsError {
		msg := strings.TrimSpace(out)
		if msg == "" {
			msg = "the tool reported an error"
		}
		return "", errors.New(msg)
	}
	return out, nil
}

// stopConn stops c if it is still the server's connection (a parallel call
// may have restarted the server meanwhile).
func (srv *mcpServer) stopConn(c *mcpConn, kill bool) error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.conn != c {
		return nil
	}
	return srv.closeLocked(kill)
}

// mcpCallResult is what tools/call returns.
type mcpCallResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent"`
	IsError           bool              `json:"isError"`
}

// mcpContent is one content block of a result.
type mcpContent struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Data        string `json:"data"` // base64: image, audio
	MIMEType    string `json:"mimeType"`
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Resource    *struct {
		URI      string `json:"uri"`
		MIMEType string `json:"mimeType"`
		Text     string `json:"text"`
		Blob     string `json:"blob"` // base64
	} `json:"resource"`
}

// decodedLen is the size of base64 data, for a description.
func decodedLen(b64 string) int {
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return len(b64) * 3 / 4
	}
	return len(b)
}

// mcpText renders a tool result's content for a model: text as is, other
// content as a short description, structured content as JSON.
func mcpText(res *mcpCallResult) string {
	var b strings.Builder
	for _, raw := range res.Content {
		var c mcpContent
		if json.Unmarshal(raw, &c) != nil {
			continue
		}
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		switch c.Type {
		case "text":
			b.WriteString(c.Text)
		case "image", "audio":
			fmt.Fprintf(&b, "[%s: %s, %d bytes]", c.Type, c.MIMEType, decodedLen(c.Data))
		case "resource_link":
			fmt.Fprintf(&b, "[resource link: %s", c.URI)
			if c.Name != "" {
				fmt.Fprintf(&b, " (%s)", c.Name)
			}
			if c.Description != "" {
				fmt.Fprintf(&b, ": %s", c.Description)
			}
			b.WriteString("]")
		case "resource":
			if c.Resource == nil {
				continue
			}
			if c.Resource.Text != "" {
				fmt.Fprintf(&b, "[resource %s]\n%s", c.Resource.URI, c.Resource.Text)
			} else {
				fmt.Fprintf(&b, "[resource %s: %s, %d bytes]", c.Resource.URI, c.Resource.MIMEType, decodedLen(c.Resource.Blob))
			}
		default:
			var compact bytes.Buffer
			if json.Compact(&compact, raw) == nil {
				b.Write(compact.Bytes())
			}
		}
	}
	if sc := bytes.TrimSpace(res.StructuredContent); len(sc) > 0 && string(sc) != "null" {
		var raw bytes.Buffer
		if json.Compact(&raw, sc) == nil && !sameJSON(raw.Bytes(), b.String()) {
			if b.Len() > 0 {
				if !strings.HasSuffix(b.String(), "\n") {
					b.WriteByte('\n')
				}
				b.WriteString("[structured content]\n")
			}
			b.Write(raw.Bytes())
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
