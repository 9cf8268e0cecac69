// Package fake holds zero-latency stand-ins for pg-llm serve and pg-tool
// serve, for pg-loop's tests and benchmarks: they speak the real line
// protocols with no model and no work behind them.
package fake

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/llm"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// ToolDefs is what List prints: one trivial tool.
var ToolDefs = []protocol.ToolDef{{Name: "echo", Description: "returns its input", InputSchema: json.RawMessage(`{"type":"object"}`)}}

// LLM answers requests (pg-llm serve): a call of the echo tool while the
// conversation has fewer than 2*steps+1 messages, then a final answer.
// With held "held" it holds conversations as pg-llm serve does (after and
// held, docs/protocol.md); with "forget" it names them but has forgotten
// them when asked. log, when not nil, gets a line per request:
// "after=NAME new=N total=N tools=SENT/ALL system=S".
func LLM(in io.Reader, out io.Writer, steps int, held string, log io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	w := bufio.NewWriter(out)
	enc := jsonl.NewEncoder(w)
	u := protocol.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.0001}
	var convs llm.Held
	for sc.Scan() {
		var req protocol.Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return err
		}
		after, sent, tools := req.After, len(req.Messages), len(req.Tools)
		if after != "" && held == "forget" {
			req.After = "forgotten"
		}
		if err := convs.Expand(&req); err != nil {
			_ = enc.Encode(err.(*llm.Error).Event(req.ID))
			if err := w.Flush(); err != nil {
				return err
			}
			continue
		}
		if log != nil {
			fmt.Fprintf(log, "after=%s new=%d total=%d tools=%d/%d system=%q\n", after, sent, len(req.Messages), tools, len(req.Tools), req.System)
		}
		var msg protocol.Message
		stop := "tool_use"
		if len(req.Messages) < 2*steps+1 {
			in := json.RawMessage(fmt.Sprintf(`{"n":%d}`, len(req.Messages)))
			msg = protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Content{{Type: protocol.BlockToolCall, ID: fmt.Sprintf("c%d", len(req.Messages)), Name: "echo", Input: in}}}
		} else {
			stop = "end_turn"
			msg = protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Content{{Type: protocol.BlockText, Text: "done"}}}
		}
		_ = enc.Encode(protocol.StartEvent{Type: protocol.EventStart, ID: req.ID, Provider: "fake", Model: "fake/zero"})
		end := protocol.EndEvent{Type: protocol.EventEnd, ID: req.ID, StopReason: stop, Message: msg, Usage: u}
		if held != "" {
			convs.Hold(&req, &end)
		}
		_ = enc.Encode(end)
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return sc.Err()
}

// Tools answers calls (pg-tool serve): echo returns its input; a list
// request gets ToolDefs.
func Tools(in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	w := bufio.NewWriter(out)
	enc := jsonl.NewEncoder(w)
	for sc.Scan() {
		if t, _ := protocol.TypeOf(sc.Bytes()); t == "list" {
			var req protocol.ToolListRequest
			if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
				return err
			}
			_ = enc.Encode(protocol.ToolsEvent{Type: "tools", ID: req.ID, Tools: ToolDefs})
			if err := w.Flush(); err != nil {
				return err
			}
			continue
		}
		var c protocol.ToolCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return err
		}
		r := protocol.ToolResult{Type: "result", ID: c.ID, Name: c.Name, OK: c.Name == "echo", Output: string(c.Input)}
		if !r.OK {
			e := "unknown tool " + c.Name
			r.Error = &e
		}
		_ = enc.Encode(r)
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return sc.Err()
}

// List prints the tool definitions (pg-tool list).
func List(out io.Writer) error { return json.NewEncoder(out).Encode(ToolDefs) }

// Main dispatches: llm [STEPS [held|forget [LOG]]] | tools | list.
func Main(args []string, in io.Reader, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: pgfake llm [STEPS [held|forget [LOG]]] | tools | list")
	}
	switch args[0] {
	case "llm":
		steps, held := 1, ""
		var log io.Writer
		if len(args) > 1 {
			fmt.Sscan(args[1], &steps)
		}
		if len(args) > 2 {
			held = args[2]
		}
		if len(args) > 3 {
			f, err := os.OpenFile(args[3], os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			log = f
		}
		return LLM(in, out, steps, held, log)
	case "tools":
		return Tools(in, out)
	case "list":
		return List(out)
	}
	return fmt.Errorf("unknown mode %q", args[0])
}
