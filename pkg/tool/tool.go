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
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
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
	compiled *jsonschema.Schema
	cerr     error
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
		out.Output, out.Truncated, out.FullOutput = s.capOutput(call, output)
		if err != nil {
			msg := err.Error()
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
	return finish(output, err, "")
}

// validate checks input against the tool's schema; errors name the field.
func (t *Tool) validate(input json.RawMessage) error {
	t.once.Do(func() {
		if len(t.Schema) == 0 {
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(t.Schema))
		if err != nil {
			t.cerr = err
			return
		}
		c := jsonschema.NewCompiler()
		url := "tool-" + t.Name + ".json"
		if err = c.AddResource(url, doc); err == nil {
			t.compiled, err = c.Compile(url)
		}
		t.cerr = err
	})
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(input))
	if err != nil {
		return fmt.Errorf("input of %s is not valid JSON: %v", t.Name, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("input of %s must be a JSON object", t.Name)
	}
	if t.compiled == nil {
		return nil // no schema, or one we cannot compile (an MCP server's): the tool judges
	}
	err = t.compiled.Validate(v)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	var msgs []string
	collectCauses(ve, &msgs)
	sort.Strings(msgs)
	return fmt.Errorf("invalid input for %s: %s", t.Name, strings.Join(dedupe(msgs), "; "))
}

var printer = message.NewPrinter(language.English)

func collectCauses(ve *jsonschema.ValidationError, out *[]string) {
	if len(ve.Causes) == 0 {
		field := "input"
		if len(ve.InstanceLocation) > 0 {
			field = strings.Join(ve.InstanceLocation, ".")
		}
		msg := ve.ErrorKind.LocalizedString(printer)
		// "missing property 'path'" reads better naming the field itself.
		if strings.HasPrefix(msg, "missing propert") {
			if i := strings.Index(msg, "'"); i >= 0 {
				names := strings.ReplaceAll(msg[i:], "'", "")
				*out = append(*out, fmt.Sprintf("missing required field %s", names))
				return
			}
		}
		if strings.HasPrefix(msg, "additional propert") {
			names := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(msg, "additional properties "), "additional property "), " not allowed")
			*out = append(*out, "unknown field "+strings.ReplaceAll(names, "'", `"`))
			return
		}
		*out = append(*out, fmt.Sprintf("field %s: %s", field, msg))
		return
	}
	for _, c := range ve.Causes {
		collectCauses(c, out)
	}
}

func dedupe(ss []string) []string {
	var out []string
	for i, s := range ss {
		if i == 0 || s != ss[i-1] {
			out = append(out, s)
		}
	}
	return out
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
				return nil, err
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
