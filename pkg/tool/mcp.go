package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/powerglide/powerglide/pkg/proc"
)

// MCP servers: each "name=command args" spec is a server started (once, on
// first use) as a child over stdio with the official Go SDK. Its tools
// appear as mcp__<name>__<tool>. A server that dies is reported in the
// failing call's result and started again on the next call.

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
	cs    *mcp.ClientSession
	cmd   *exec.Cmd
	start string        // the server's start time, read when it answered
	dead  chan struct{} // closed when the connection ends
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

func (srv *mcpServer) startLocked(ctx context.Context) error {
	argv, err := srv.s.sandboxed([]string{"bash", "-c", "exec " + srv.cmdline})
	if err != nil {
		return fmt.Errorf("mcp server %s (%s) did not start: %w", srv.name, srv.cmdline, err)
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
	client := mcp.NewClient(&mcp.Implementation{Name: "pg-tool", Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, mcpStartTimeout)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
	if err != nil {
		// The SDK may have reaped it already (closing the failed
		// connection): its group is killed only while it is not, which
		// the pidfd of the os.Process tells.
		if cmd.Process != nil && cmd.Process.Signal(syscall.Signal(0)) == nil {
			_, _ = proc.Adopt(cmd).SignalGroup(syscall.SIGKILL)
			_ = cmd.Wait()
		}
		return fmt.Errorf("mcp server %s (%s) did not start: %w", srv.name, srv.cmdline, err)
	}
	start, _ := proc.StartTime(cmd.Process.Pid)
	dead := make(chan struct{})
	go func() { _ = cs.Wait(); close(dead) }()
	var tools []*Tool
	for t, err := range cs.Tools(cctx, nil) {
		if err != nil {
			_ = cs.Close()
			return fmt.Errorf("mcp server %s: list tools: %w", srv.name, err)
		}
		tools = append(tools, srv.wrap(t))
	}
	srv.cs, srv.cmd, srv.start, srv.dead, srv.tools = cs, cmd, start, dead, tools
	return nil
}

// closeLocked shuts the server down: stdin closed, then SIGTERM and SIGKILL
// after a grace (the SDK's transport), then whatever is left of its
// process group is killed. With kill, the group is killed first: a server
// that hangs gets no grace.
func (srv *mcpServer) closeLocked(kill bool) error {
	if srv.cs == nil {
		return nil
	}
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

func (srv *mcpServer) stop(kill bool) error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.closeLocked(kill)
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
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			return "", fmt.Errorf("mcp server %s: %s: %s", srv.name, name, rpcErr.Message)
		}
		if ctx.Err() != nil {
			return "", err
		}
		if cctx.Err() != nil {
			// A server that does not answer may never answer: stop it
			// (process group and all) and start afresh next time.
			_ = srv.stop(true)
			return "", fmt.Errorf("mcp server %s: %s timed out after %s (--mcp-timeout); the server was stopped and will be restarted on the next call", srv.name, name, limit)
		}
		// Give the connection watcher a moment to notice a dead server.
		select {
		case <-dead:
		case <-time.After(200 * time.Millisecond):
		}
		select {
		case <-dead:
			_ = srv.stop(true)
			return "", fmt.Errorf("mcp server %s died during the call (%v); it will be restarted on the next call", srv.name, err)
		default:
		}
		return "", fmt.Errorf("mcp server %s: %s: %w", srv.name, name, err)
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
