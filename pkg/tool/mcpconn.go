package tool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The MCP client side pg-tool needs, over stdio: initialize, tools/list,
// tools/call. Messages are encoded and decoded by the official SDK's
// jsonrpc package. The SDK's mcp package would do the rest, but it links
// net/http, crypto/tls, oauth2 and gob for its HTTP transports, whose
// package initialisation every cold `pg-tool call` would pay (about a
// sixth of its start-up), MCP or not.

// mcpProtocolVersion is asked for in initialize; a server that does not
// know it answers with one it does, which is accepted: pg-tool uses only
// what every version has (tools, content, isError), and structured
// content where the server sends it.
const mcpProtocolVersion = "2025-11-25"

// mcpGrace is how long a server gets to exit after its input closes, and
// again after SIGTERM, before it is killed.
const mcpGrace = time.Second

// mcpConn is a running server process and the JSON-RPC connection over its
// stdin and stdout (one message per line).
type mcpConn struct {
	cmd *exec.Cmd
	in  *os.File // the server's stdin
	log io.Writer
	wmu sync.Mutex // one message at a time on in

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan *jsonrpc.Response

	dead    chan struct{} // closed when the server's output ends
	exited  chan struct{} // closed once the process has been waited for
	waitErr error         // set before exited is closed
}

var errServerGone = errors.New("the server closed the connection")

// startMCPConn starts cmd (its own process group, so stopping it stops what
// it started) with pipes for stdin and stdout.
func startMCPConn(cmd *exec.Cmd, log io.Writer) (*mcpConn, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	// Pipes made here, not by exec: Wait must not close the output the
	// reader is still reading.
	cmd.Stdin, cmd.Stdout = inR, outW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A child that keeps stderr open must not hold up Wait.
	cmd.WaitDelay = mcpGrace
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	c := &mcpConn{cmd: cmd, in: inW, log: log, pending: map[int64]chan *jsonrpc.Response{},
		dead: make(chan struct{}), exited: make(chan struct{})}
	go c.read(outR)
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

func (c *mcpConn) read(r *os.File) {
	defer close(c.dead)
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			c.handle(line)
		}
		if err != nil {
			return
		}
	}
}

func (c *mcpConn) handle(line []byte) {
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		fmt.Fprintf(c.log, "not a JSON-RPC message on stdout (ignored): %.200s\n", bytes.TrimSpace(line))
		return
	}
	switch m := msg.(type) {
	case *jsonrpc.Response:
		id, _ := m.ID.Raw().(int64)
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	case *jsonrpc.Request:
		if !m.IsCall() {
			return // notifications (logging, progress, list changes) are not used
		}
		resp := &jsonrpc.Response{ID: m.ID}
		if m.Method == "ping" {
			resp.Result = json.RawMessage(`{}`)
		} else {
			// pg-tool declares no client capabilities (roots, sampling, ...).
			resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "pg-tool does not serve " + m.Method}
		}
		_ = c.send(resp, time.Now().Add(10*time.Second))
	}
}

func (c *mcpConn) send(msg jsonrpc.Message, deadline time.Time) error {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	// A server that stops reading must not hold the call past its deadline.
	_ = c.in.SetWriteDeadline(deadline)
	_, err = c.in.Write(append(b, '\n'))
	return err
}

func (c *mcpConn) notify(method string, params any, deadline time.Time) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return c.send(&jsonrpc.Request{Method: method, Params: raw}, deadline)
}

// call sends a request and decodes its result into result. A JSON-RPC
// error comes back as a *jsonrpc.Error; a server that goes away, as
// errServerGone. When ctx ends first, the server is told the request is
// cancelled.
func (c *mcpConn) call(ctx context.Context, method string, params, result any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	ch := make(chan *jsonrpc.Response, 1)
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	jid, err := jsonrpc.MakeID(float64(id))
	if err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	if err := c.send(&jsonrpc.Request{ID: jid, Method: method, Params: raw}, deadline); err != nil {
		select {
		case <-c.dead:
			return errServerGone
		default:
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("send %s: %w", method, err)
	}
	var resp *jsonrpc.Response
	select {
	case resp = <-ch:
	case <-c.dead:
		select {
		case resp = <-ch: // it answered just before it went
		default:
			return errServerGone
		}
	case <-ctx.Done():
		_ = c.notify("notifications/cancelled", map[string]any{"requestId": id, "reason": context.Cause(ctx).Error()}, time.Now().Add(time.Second))
		return ctx.Err()
	}
	if resp.Error != nil {
		return resp.Error
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(resp.Result, result); err != nil {
		return fmt.Errorf("bad %s result: %w", method, err)
	}
	return nil
}

// gone describes why the server went away, once it has: its exit status
// when it exited.
func (c *mcpConn) gone() string {
	select {
	case <-c.exited:
		if c.waitErr != nil {
			return "it exited: " + c.waitErr.Error()
		}
		return "it exited"
	case <-time.After(200 * time.Millisecond):
		return "it closed its output"
	}
}

// close ends the server: its input closed (a stdio server then exits),
// SIGTERM to its process group after mcpGrace, SIGKILL after another;
// then whatever is left of the group is killed. With kill, the group is
// killed at once: a server that hangs gets no grace.
func (c *mcpConn) close(kill bool) {
	pgid := c.cmd.Process.Pid
	if kill {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	c.in.Close()
escalate:
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case <-c.exited:
			break escalate
		case <-time.After(mcpGrace):
			_ = syscall.Kill(-pgid, sig)
		}
	}
	<-c.exited
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
