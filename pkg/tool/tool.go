// Package tool holds pg-tool's tools and the machinery that runs them: a
// registry of built-in, external and MCP tools, input validation against
// each tool's JSON Schema, workspace confinement, output capping, and the
// edit veto. A Session runs calls; pg-tool's CLI is a thin layer over it.
package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// Tool is one tool a model can call.
type Tool struct {
	Name        string
	Description string
	Schema      json.RawMessage
	// ReadOnly tools cannot change the workspace; the readonly preset keeps only these.
	ReadOnly bool
	// Run does the work. A non-nil error makes the result ok:false; the
	// output, when not empty, is still returned (e.g. a failing command's output).
	Run func(ctx context.Context, s *Session, input json.RawMessage) (string, error)

	once     sync.Once
	compiled *schema
}

// Def is the definition `pg-tool list` prints.
func (t *Tool) Def() protocol.ToolDef {
	return protocol.ToolDef{Name: t.Name, Description: t.Description, InputSchema: t.Schema}
}

// Options configure a Session.
type Options struct {
	Root     string   // workspace root; "" is the working directory
	Preset   string   // "full" (default) or "readonly"
	Allow    []string // globs over tool names; when set, only matching tools exist
	Deny     []string // globs over tool names removed after Allow
	ToolsDir string   // external tools directory ("" for none)
	MCP      []string // MCP servers as "name=command args"
	Verify   string   // edit veto command, run with bash -c in the root
	// MCPTimeout bounds one MCP tool call (default DefaultMCPTimeout); a
	// server that does not answer in time is stopped and restarted later.
	MCPTimeout time.Duration
	// VerifyTimeout bounds one run of the verify command (default 5m).
	VerifyTimeout time.Duration
	MaxOutput     int    // output cap in characters (default 30000; <0 disables)
	OutputDir     string // where truncated outputs are saved in full
	// PersistCwd makes bash's working directory carry over between calls (serve mode).
	PersistCwd bool
	Env        []string  // environment of child processes
	Log        io.Writer // diagnostics (MCP server stderr, warnings); nil discards
}

// DefaultMaxOutput is the default output cap in characters.
const DefaultMaxOutput = 30000

// Result kinds beyond a plain failure: they decide pg-tool call's exit code.
const (
	KindUnknownTool = "unknown_tool"
	KindBadInput    = "bad_input"
	// KindUnavailable: the tool exists but its MCP server could not start,
	// a runtime failure (exit 1), not a usage error.
	KindUnavailable = "unavailable"
)

// Outcome is a result with the kind of its error, if any.
type Outcome struct {
	protocol.ToolResult
	Kind string
}

// Call runs one tool call and never fails: every problem becomes an ok:false result.
func (s *Session) Call(ctx context.Context, call protocol.ToolCall) Outcome {
	start := time.Now()
	out := Outcome{ToolResult: protocol.ToolResult{Type: "result", ID: call.ID, Name: call.Name}}
	finish := func(output string, err error, kind string) Outcome {
		out.Output, out.Truncated, out.FullOutput = s.capOutput(call, output, "output")
		if err != nil {
			// Error text (a verifier's output, an external tool's stderr, an
			// MCP server's message) gets the same cap. Its marker names the
			// file; full_output names it too when the output was not cut.
			msg, cut, file := s.capOutput(call, err.Error(), "error")
			if cut {
				out.Truncated = true
				if out.FullOutput == "" {
					out.FullOutput = file
				}
			}
			out.Error = &msg
			out.Kind = kind
		} else {
			out.OK = true
		}
		out.DurationMS = time.Since(start).Milliseconds()
		return out
	}
	t, err := s.Lookup(ctx, call.Name)
	if err != nil {
		var down *unavailableError
		if errors.As(err, &down) {
			return finish("", err, KindUnavailable)
		}
		return finish("", err, KindUnknownTool)
	}
	input := call.Input
	if len(bytes.TrimSpace(input)) == 0 || string(bytes.TrimSpace(input)) == "null" {
		input = json.RawMessage("{}")
	}
	if err := t.validate(input); err != nil {
		return finish("", err, KindBadInput)
	}
	output, err := t.Run(ctx, s, input)
	if err != nil && ctx.Err() != nil && !errors.Is(err, errTimeout) {
		err = fmt.Errorf("%s: cancelled: %w", call.Name, context.Cause(ctx))
	}
	var bad *inputError
	if errors.As(err, &bad) {
		return finish(output, err, KindBadInput)
	}
	return finish(output, err, "")
}

// inputError marks input that passed the schema but that a tool found
// malformed (a glob or regexp that does not compile): bad input, exit 2.
type inputError struct{ err error }

func (e *inputError) Error() string { return e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

func badInput(err error) error { return &inputError{err} }

// unavailableError marks a tool whose MCP server could not start.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// validate checks input against the tool's schema; errors name the field.
func (t *Tool) validate(input json.RawMessage) error {
	t.once.Do(func() {
		if len(t.Schema) > 0 {
			t.compiled, _ = parseSchema(t.Schema)
		}
	})
	v, err := decodeNumbers(input)
	if err != nil {
		return fmt.Errorf("input of %s is not valid JSON: %v", t.Name, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("input of %s must be a JSON object", t.Name)
	}
	if t.compiled == nil {
		return nil // no schema, or one we cannot read: the tool judges
	}
	if msgs := t.compiled.check(v); len(msgs) > 0 {
		return fmt.Errorf("invalid input for %s: %s", t.Name, strings.Join(msgs, "; "))
	}
	return nil
}

// decodeNumbers is json.Unmarshal into an any, with numbers kept as
// written (json.Number): 1.5 is no integer, 2^64 no float.
func decodeNumbers(b []byte) (any, error) {
	if !json.Valid(b) {
		var v any
		return nil, json.Unmarshal(b, &v) // the error says where
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	err := d.Decode(&v)
	return v, err
}

// number turns "1.000000" into "1"; other numbers stay as written.
func number(s string) string {
	if f, err := strconv.ParseFloat(s, 64); err == nil && strings.ContainsAny(s, ".eE") {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return s
}

// allowed applies the preset and the allow/deny globs to a tool.
func (s *Session) allowed(t *Tool) bool {
	if s.opts.Preset == "readonly" && !t.ReadOnly {
		return false
	}
	if len(s.opts.Allow) > 0 && !matchAny(s.opts.Allow, t.Name) {
		return false
	}
	return !matchAny(s.opts.Deny, t.Name)
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// ValidateGlobs reports a malformed --allow or --deny pattern.
func ValidateGlobs(globs []string) error {
	for _, g := range globs {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("bad tool glob %q: %v", g, err)
		}
	}
	return nil
}

// Lookup finds a tool by name, loading external tools or starting an MCP
// server only when the name needs them.
func (s *Session) Lookup(ctx context.Context, name string) (*Tool, error) {
	if t, ok := s.builtins[name]; ok && s.allowed(t) {
		return t, nil
	}
	if _, builtin := s.builtins[name]; !builtin {
		if strings.HasPrefix(name, "mcp__") {
			if t, err := s.mcp.lookup(ctx, name); err != nil {
				return nil, &unavailableError{err}
			} else if t != nil && s.allowed(t) {
				return t, nil
			}
		} else if t := s.external(ctx, name); t != nil && s.allowed(t) {
			return t, nil
		}
	}
	all, _ := s.Tools(ctx)
	names := make([]string, 0, len(all))
	for _, t := range all {
		names = append(names, t.Name)
	}
	return nil, fmt.Errorf("unknown tool %q; known tools: %s", name, strings.Join(names, ", "))
}

// Tools lists every tool the session offers, built-ins first. Errors of
// external tools or MCP servers are reported but do not hide the others.
func (s *Session) Tools(ctx context.Context) ([]*Tool, error) {
	var out []*Tool
	for _, t := range s.order {
		if s.allowed(t) {
			out = append(out, t)
		}
	}
	for _, t := range s.externals(ctx) {
		if s.allowed(t) {
			out = append(out, t)
		}
	}
	mts, err := s.mcp.tools(ctx)
	for _, t := range mts {
		if s.allowed(t) {
			out = append(out, t)
		}
	}
	return out, err
}

// lazyRegexp compiles on first use: package init stays cheap, which a cold
// `pg-tool call` feels.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
