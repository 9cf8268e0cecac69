// Package mcpserver serves a tool session over the Model Context Protocol,
// so MCP clients (Claude Code, codex, editors, the MCP Inspector) get the
// tools pg-tool serve offers. Every call goes through tool.Session.Call,
// the path pg-tool serve takes: the preset, the allow and deny globs,
// confinement, the sandbox, the edit veto, output capping and redaction
// apply alike, and the result's text is the one pg-loop shows a model.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/tool"
)

// Meta keys of a result: what a pg-tool serve result says beyond its text.
const (
	MetaTruncated  = "powerglide/truncated"
	MetaFullOutput = "powerglide/full_output"
	MetaUntrusted  = "powerglide/untrusted"
	MetaSandbox    = "powerglide/sandbox"
	MetaDuration   = "powerglide/duration_ms"
)

// New builds an MCP server offering the session's tools. Tools that
// cannot be listed (an MCP server that does not start, an external tool
// whose --schema fails) are reported on log; the others are served.
func New(ctx context.Context, s *tool.Session, version string, log io.Writer) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "pg-tool", Version: version}, &mcp.ServerOptions{
		Instructions: "The tools of a coding agent confined to the workspace " + s.RootPath() + ": shell, files, search, terminals, and the external and MCP tools pg-tool was given.",
	})
	tools, err := s.Tools(ctx)
	if err != nil {
		fmt.Fprintf(log, "pg-tool: warning: %s\n", secrets.RedactString(err.Error()))
	}
	srv.AddReceivingMiddleware(plainResults)
	var seq atomic.Int64
	for _, t := range tools {
		srv.AddTool(definition(t), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			id := "mcp-" + strconv.FormatInt(seq.Add(1), 10)
			out := s.Call(ctx, protocol.ToolCall{ID: id, Name: t.Name, Input: req.Params.Arguments})
			return Result(out.ToolResult), nil
		})
	}
	return srv
}

// Serve serves the session over MCP's stdio transport, newline-delimited
// JSON-RPC on in and out, until the client closes in or ctx ends.
func Serve(ctx context.Context, s *tool.Session, in io.Reader, out io.Writer, version string, log io.Writer) error {
	srv := New(ctx, s, version, log)
	err := srv.Run(ctx, &lineTransport{in: in, out: out})
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed) {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

// definition is a tool as MCP lists it. MCP wants an object schema; a
// tool whose schema says nothing of its type gets "type":"object" added,
// and one whose schema is no object at all is offered with the empty
// object schema (pg-tool still checks the input against its own).
func definition(t *tool.Tool) *mcp.Tool {
	schema := json.RawMessage(`{"type":"object"}`)
	var m map[string]any
	if json.Unmarshal(t.Schema, &m) == nil && m != nil {
		switch m["type"] {
		case "object":
			schema = t.Schema
		case nil:
			m["type"] = "object"
			if b, err := json.Marshal(m); err == nil {
				schema = b
			}
		}
	}
	def := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: schema}
	if t.ReadOnly {
		def.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
	}
	return def
}

// Result turns a pg-tool result into an MCP one: the text a model is
// shown (see protocol.ToolResult.Text), is_error when the call failed,
// and the rest (truncation, the full output's file, untrusted, sandbox,
// duration) in _meta.
func Result(r protocol.ToolResult) *mcp.CallToolResult {
	meta := mcp.Meta{MetaTruncated: r.Truncated, MetaDuration: r.DurationMS}
	if r.FullOutput != "" {
		meta[MetaFullOutput] = r.FullOutput
	}
	if r.Untrusted {
		meta[MetaUntrusted] = true
	}
	if r.Sandbox != "" {
		meta[MetaSandbox] = r.Sandbox
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Text()}}, IsError: !r.OK}
	res.Meta = meta
	return res
}

// plainResult is a tools/call result of one text content, as MCP writes
// it. The SDK encodes its CallToolResult through nested JSON marshalers,
// whose output encoding/json scans again at every level: for a large
// output those passes cost more than the call. This plain struct is
// encoded in one pass, and lineTransport writes it as it is.
type plainResult struct {
	mcp.ResultBase
	Content []plainText `json:"content"`
	IsError bool        `json:"isError,omitempty"`
}

type plainText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// plainResults turns each tools/call result of one text content into a
// plainResult: the same JSON on the wire.
func plainResults(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || len(r.Content) != 1 || r.StructuredContent != nil {
			return res, err
		}
		text, ok := r.Content[0].(*mcp.TextContent)
		if !ok || text.Meta != nil || text.Annotations != nil {
			return res, err
		}
		p := &plainResult{Content: []plainText{{Type: "text", Text: text.Text}}, IsError: r.IsError}
		p.Meta = r.Meta
		return p, nil
	}
}
