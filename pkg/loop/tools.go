package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// Tools runs tool calls. Call runs the calls of one turn, in parallel
// where the component allows it, and returns one result per call in the
// calls' order; a call that could not run gets a failed result.
type Tools interface {
	List(ctx context.Context) ([]protocol.ToolDef, error)
	Call(ctx context.Context, calls []protocol.ToolCall) ([]protocol.ToolResult, error)
	Close() error
}

// ListCommand runs a `pg-tool list`-like command and decodes its array.
// env is the command's environment (nil: this process's).
func ListCommand(ctx context.Context, cmdline, dir string, env []string, stderr io.Writer, args ...string) ([]protocol.ToolDef, error) {
	cmd := shellCommand(ctx, env, cmdline, args...)
	cmd.Dir = dir
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("list tools with %q: %w", strings.TrimSpace(cmdline+" "+strings.Join(args, " ")), err)
	}
	var defs []protocol.ToolDef
	if err := json.Unmarshal(out, &defs); err != nil {
		return nil, fmt.Errorf("list tools with %q: expected a JSON array of tool definitions: %w", cmdline, err)
	}
	return checkDefs(defs, cmdline)
}

// checkDefs refuses a definition without a name and gives one without a
// schema the empty object's.
func checkDefs(defs []protocol.ToolDef, source string) ([]protocol.ToolDef, error) {
	for i, d := range defs {
		if d.Name == "" {
			return nil, fmt.Errorf("list tools with %q: tool %d has no name", source, i)
		}
		if len(d.InputSchema) == 0 {
			defs[i].InputSchema = json.RawMessage(`{"type":"object"}`)
		}
	}
	return defs, nil
}

// Bounds of a tool call's run by pg-tool's timeouts: bash's default
// (its timeout_ms input sets another), and for any other tool the longest
// any has (bash's maximum, an MCP call's --mcp-timeout default).
const (
	bashCallBound    = 2 * time.Minute
	defaultCallBound = 10 * time.Minute
)

// callBound is how long a tool call may take by its own timeout: its
// timeout_ms input when it has one, else the tool's default bound.
func callBound(c protocol.ToolCall) time.Duration {
	var in struct {
		TimeoutMS float64 `json:"timeout_ms"`
	}
	if json.Unmarshal(c.Input, &in) == nil && in.TimeoutMS > 0 && in.TimeoutMS <= float64(24*time.Hour/time.Millisecond) {
		return time.Duration(in.TimeoutMS) * time.Millisecond
	}
	if c.Name == "bash" {
		return bashCallBound
	}
	return defaultCallBound
}

func failedResult(c protocol.ToolCall, msg string) protocol.ToolResult {
	return protocol.ToolResult{Type: "result", ID: c.ID, Name: c.Name, OK: false, Error: &msg}
}

// ServeTools talks to `pg-tool serve`; the tool list comes from ListCmd,
// or with Inband from the coprocess itself.
type ServeTools struct {
	co      *coprocess
	ListCmd string
	// Inband asks the coprocess for the list (a tool-list-request,
	// docs/protocol.md): no list process at launch. Only for a component
	// known to be pg-tool serve.
	Inband bool
	Dir    string
	env    []string
	stderr io.Writer
}

// NewServeTools runs cmdline as a tools coprocess; listCmd prints the tool
// definitions. env is their environment (nil: this process's); pg-loop
// gives it without secrets, so that only the model component holds keys.
func NewServeTools(cmdline, listCmd, dir string, env []string, stderr io.Writer) *ServeTools {
	co := newCoprocess("tools", cmdline, stderr)
	co.dir, co.env = dir, env
	return &ServeTools{co: co, ListCmd: listCmd, Dir: dir, env: env, stderr: stderr}
}

// List runs the list command, or asks the coprocess (Inband).
func (t *ServeTools) List(ctx context.Context) ([]protocol.ToolDef, error) {
	if t.Inband {
		return t.listInband(ctx)
	}
	if t.ListCmd == "" {
		return nil, nil
	}
	return ListCommand(ctx, t.ListCmd, t.Dir, t.env, t.stderr)
}

// listInband sends a list request to the coprocess, starting it.
func (t *ServeTools) listInband(ctx context.Context) ([]protocol.ToolDef, error) {
	wire := nextID("l")
	reply, err := t.co.ask(ctx, wire, protocol.ToolListRequest{Type: "list", ID: wire})
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	ev, err := protocol.ToolOutputs.Decode(reply)
	if err != nil {
		return nil, fmt.Errorf("list tools with %q: %w", t.co.cmdline, err)
	}
	switch e := ev.(type) {
	case *protocol.ToolsEvent:
		if e.Error != nil {
			return nil, fmt.Errorf("list tools with %q: %s", t.co.cmdline, *e.Error)
		}
		return checkDefs(e.Tools, t.co.cmdline)
	case *protocol.ErrorEvent:
		return nil, fmt.Errorf("list tools with %q: %s", t.co.cmdline, e.Message)
	}
	return nil, fmt.Errorf("list tools with %q: unexpected %s record", t.co.cmdline, reply)
}

// DiedResult is the error result of a call whose tools coprocess died
// before it answered: the call may have run in part, in whole or not at all.
const DiedResult = "the tool server died during this call; its effects are unknown: check the state before running it again. A fresh tool server takes the next call: bash starts again in the workspace root"

// Call writes every call, then waits for all their results. When the
// coprocess dies, Call returns a *DiedError with the results: those it
// gave before it died, and DiedResult for the others.
func (t *ServeTools) Call(ctx context.Context, calls []protocol.ToolCall) ([]protocol.ToolResult, error) {
	type pending struct {
		ch     chan []byte
		dead   chan struct{}
		wireID string
	}
	var ps []pending
	defer func() {
		for _, p := range ps {
			t.co.forget(p.wireID)
		}
	}()
	out := make([]protocol.ToolResult, len(calls))
	var died error
	for _, c := range calls {
		// The wire id is ours, so two turns that reuse a model id never mix.
		wire := nextID("c")
		line, err := marshalLine(protocol.ToolCall{ID: wire, Name: c.Name, Input: c.Input})
		if err != nil {
			return nil, err
		}
		ch, dead, err := t.co.send(wire, func(int) ([]byte, error) { return line, nil })
		if de := (*DiedError)(nil); errors.As(err, &de) {
			died = err // the calls sent so far went to the child that died
			break
		}
		if err != nil {
			return nil, err
		}
		ps = append(ps, pending{ch, dead, wire})
	}
	for i := range out {
		if i >= len(ps) {
			out[i] = failedResult(calls[i], DiedResult)
			continue
		}
		p := ps[i]
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case line := <-p.ch:
			out[i] = decodeResult(calls[i], line)
		case <-p.dead:
			select {
			case line := <-p.ch:
				out[i] = decodeResult(calls[i], line)
			default:
				died = t.co.err()
				out[i] = failedResult(calls[i], DiedResult)
			}
		}
	}
	return out, died
}

func decodeResult(c protocol.ToolCall, line []byte) protocol.ToolResult {
	ev, err := protocol.ToolOutputs.Decode(line)
	if err != nil {
		return failedResult(c, "tool component: "+err.Error())
	}
	switch e := ev.(type) {
	case *protocol.ToolResult:
		r := *e
		r.ID, r.Name = c.ID, c.Name
		return r
	case *protocol.ErrorEvent:
		return failedResult(c, e.Message)
	}
	return failedResult(c, "tool component: unexpected record")
}

// Close stops the coprocess.
func (t *ServeTools) Close() error { return t.co.Close() }

// Usage is what the coprocesses that exited used (see ProcessUsage).
func (t *ServeTools) Usage() (protocol.ProcessUsage, bool) { return t.co.usage() }

// Start starts the coprocess in the background.
func (t *ServeTools) Start() { t.co.prestart(true) }

// CommandTools runs `CMD call NAME INPUT` per call and `CMD list`.
type CommandTools struct {
	Cmdline string
	Dir     string
	Env     []string // the command's environment (nil: this process's)
	Stderr  io.Writer
}

// List runs `CMD list`.
func (t *CommandTools) List(ctx context.Context) ([]protocol.ToolDef, error) {
	return ListCommand(ctx, t.Cmdline, t.Dir, t.Env, t.Stderr, "list")
}

// Call runs the calls in parallel, one process each. A command that
// prints a result record is read as one; otherwise its stdout is the
// output and its exit status says whether it succeeded.
func (t *CommandTools) Call(ctx context.Context, calls []protocol.ToolCall) ([]protocol.ToolResult, error) {
	out := make([]protocol.ToolResult, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = t.one(ctx, c)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, nil
}

func (t *CommandTools) one(ctx context.Context, c protocol.ToolCall) protocol.ToolResult {
	input := string(c.Input)
	if input == "" {
		input = "{}"
	}
	start := time.Now()
	cmd := shellCommand(ctx, t.Env, t.Cmdline, "call", c.Name, input)
	cmd.Dir = t.Dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	b := bytes.TrimSpace(stdout.Bytes())
	if len(b) > 0 && b[0] == '{' && !bytes.Contains(b, []byte("\n")) {
		if t, _ := protocol.TypeOf(b); t == "result" || t == "error" {
			return decodeResult(c, b)
		}
	}
	r := protocol.ToolResult{Type: "result", ID: c.ID, Name: c.Name, OK: err == nil, Output: stdout.String(), DurationMS: time.Since(start).Milliseconds()}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			msg = strings.TrimSpace(fmt.Sprintf("exit %d: %s", ee.ExitCode(), msg))
		} else {
			msg = err.Error()
		}
		r.Error = &msg
	}
	return r
}

// Close does nothing.
func (t *CommandTools) Close() error { return nil }
