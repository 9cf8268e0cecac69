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
	"math/big"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/powerglide/powerglide/pkg/internal/lazyre"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/sandbox"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/skills"
)

// Tool is one tool a model can call.
type Tool struct {
	Name        string
	Description string
	Schema      json.RawMessage
	// ReadOnly tools cannot change the workspace; the readonly preset keeps only these.
	ReadOnly bool
	// WritesFiles marks a tool that changes files from pg-tool's own
	// process, where the sandbox does not reach (write, edit): under
	// --sandbox read-only it is withheld, so that mode holds for every
	// tool. (Tools that run programs run them in the sandbox.)
	WritesFiles bool
	// Run does the work. A non-nil error makes the result ok:false; the
	// output, when not empty, is still returned (e.g. a failing command's output).
	Run func(ctx context.Context, s *Session, input json.RawMessage) (string, error)
	// Untrusted reports whether a call's output comes from outside the
	// workspace (see protocol.ToolResult.Untrusted); nil: never.
	Untrusted func(input json.RawMessage) bool

	once     sync.Once
	compiled *jsonschema.Resolved
	cerr     error
	top      topLevel
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
	MCP      []string // MCP servers as "name=command args" or "name=URL"
	// MCPHeaders go with every request to the MCP server they name, which
	// must be one reached over HTTP.
	MCPHeaders []MCPHeader
	Verify     string // edit veto command, run with bash -c in the root
	// MCPTimeout bounds one MCP tool call (default DefaultMCPTimeout); a
	// server that does not answer in time is stopped and restarted later.
	MCPTimeout time.Duration
	// MCPStart bounds a server's start: a stdio server's command up to its
	// answer to initialize, or the connection to an HTTP one (default
	// DefaultMCPStart).
	MCPStart time.Duration
	// VerifyTimeout bounds one run of the verify command (default 5m).
	VerifyTimeout time.Duration
	MaxOutput     int    // output cap in characters (default 30000; <0 disables)
	OutputDir     string // where truncated outputs are saved in full
	// MaxSaved caps one saved full output in bytes (default
	// DefaultMaxSaved; <0 disables): a longer one keeps head and tail.
	MaxSaved int
	// PersistCwd makes bash's working directory carry over between calls (serve mode).
	PersistCwd bool
	// Env is the environment commands are given from, through the
	// sandbox's allow-list (nil: the process's).
	Env     []string
	PassEnv []string // more variables commands get (--pass-env)
	// Sandbox confines the commands the session starts; nil runs them
	// unconfined. The session closes it.
	Sandbox *sandbox.Sandbox
	// Helper is pg-tool's binary, which programs started by others
	// (pg-pty, the MCP SDK) run through to enter the sandbox.
	Helper string
	// TermScope is the name space of the term_* tools' pg-pty sessions
	// (see term.go): "" gives the session a fresh one, so it reaches only
	// the sessions it starts. Callers that run one pg-tool per call give
	// one scope to all of them.
	TermScope string
	// EndTermSessions makes Close end the terminal sessions the session
	// started and did not kill: a serve or mcp with a scope of its own,
	// whose sessions no later pg-tool could reach.
	EndTermSessions bool
	// Caller names the program for pg-pty list's started_by, e.g.
	// "pg-tool serve" ("" is "pg-tool"); its pid and scope are added.
	Caller string
	Log    io.Writer // diagnostics (MCP server stderr, warnings); nil discards
	// Skills are the Agent Skills offered through the skill tool (none: no
	// skill tool); read may open the files of their folders.
	Skills []skills.Skill
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
	out := Outcome{ToolResult: protocol.ToolResult{Type: "result", ID: call.ID, Name: call.Name, Sandbox: string(s.sandbox.Mode())}}
	finish := func(output string, err error, kind string) Outcome {
		// Secrets are redacted before anything is kept: the model, the
		// caller and the saved full output never see them.
		out.Output, out.Truncated, out.FullOutput = s.capOutput(call, secrets.RedactString(output), "output")
		if err != nil {
			// Error text (a verifier's output, an external tool's stderr, an
			// MCP server's message) gets the same cap. Its marker names the
			// file; full_output names it too when the output was not cut.
			msg, cut, file := s.capOutput(call, secrets.RedactString(err.Error()), "error")
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
	out.Untrusted = t.Untrusted != nil && t.Untrusted(input)
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

// always marks every call of a tool as untrusted: MCP and external tools,
// whose output comes from programs (and often networks) outside the
// workspace.
func always(json.RawMessage) bool { return true }

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
//
// The schema library is github.com/google/jsonschema-go, the tree's one
// (the MCP SDK builds on it, and the protocol tests validate with it too).
// It reports errors as English text only, which fieldError and valueError
// reword; TestValidationMessages pins every form, so an update that
// rewords the library fails there. The libraries with structured errors
// (santhosh-tekuri/jsonschema/v6 and its fork pb33f/jsonschema/v6) compile
// five drafts' meta-schemas in their package init: 20 ms and 21,000
// allocations in every process (GODEBUG=inittrace=1), against a cold
// `pg-tool call` of 7.7 ms whose target is 10 ms.
func (t *Tool) validate(input json.RawMessage) error {
	t.once.Do(func() {
		if len(t.Schema) == 0 {
			return
		}
		var sch jsonschema.Schema
		if err := json.Unmarshal(t.Schema, &sch); err != nil {
			t.cerr = err
			return
		}
		t.compiled, t.cerr = sch.Resolve(nil)
		_ = json.Unmarshal(t.Schema, &t.top)
	})
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return fmt.Errorf("input of %s is not valid JSON: %v", t.Name, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("input of %s must be a JSON object", t.Name)
	}
	if t.compiled == nil {
		return nil // no schema, or one we cannot compile (an MCP server's): the tool judges
	}
	err := t.compiled.Validate(v)
	if err == nil {
		return nil
	}
	// The validator stops at the first problem; a model fixes its call in
	// one go when it hears about every unknown and missing field at once.
	var msgs []string
	obj := v.(map[string]any)
	if t.top.Additional != nil && !*t.top.Additional {
		var unknown []string
		for k := range obj {
			if _, ok := t.top.Properties[k]; !ok {
				unknown = append(unknown, strconv.Quote(k))
			}
		}
		sort.Strings(unknown)
		if len(unknown) > 0 {
			msgs = append(msgs, "unknown field "+strings.Join(unknown, ", "))
		}
	}
	var missing []string
	for _, k := range t.top.Required {
		if _, ok := obj[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		msgs = append([]string{"missing required field " + strings.Join(missing, ", ")}, msgs...)
	}
	if m := fieldError(err.Error(), t.compiled.Schema(), v); !strings.HasPrefix(m, "unknown field ") && !strings.HasPrefix(m, "missing required field ") || len(msgs) == 0 {
		msgs = append(msgs, m)
	}
	if len(t.top.Properties) > 0 && len(msgs) > 0 && strings.HasPrefix(msgs[len(msgs)-1], "unknown field") {
		var known []string
		for k := range t.top.Properties {
			known = append(known, k)
		}
		sort.Strings(known)
		msgs[len(msgs)-1] += " (fields: " + strings.Join(known, ", ") + ")"
	}
	return fmt.Errorf("invalid input for %s: %s", t.Name, strings.Join(msgs, "; "))
}

// topLevel is what validate reads of a schema itself.
type topLevel struct {
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
	Additional *bool                      `json:"-"`
}

func (t *topLevel) UnmarshalJSON(b []byte) error {
	var raw struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
		Additional json.RawMessage            `json:"additionalProperties"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	t.Properties, t.Required = raw.Properties, raw.Required
	if string(raw.Additional) == "false" {
		f := false
		t.Additional = &f
	}
	return nil
}

var (
	propPathRe   = lazyre.Compile(`^validating (/[^:]*): `)
	additionalRe = lazyre.Compile(`unexpected additional properties \[(.*)\]`)
	requiredRe   = lazyre.Compile(`required: missing properties: \[(.*)\]`)
)

var (
	typeRe   = lazyre.Compile(`^type: .* has type "(\w+)", want (.*)$`)
	boundRe  = lazyre.Compile(`^(minimum|maximum|exclusiveMinimum|exclusiveMaximum): (\S+) is (?:less|greater) than (?:or equal to )?(\S+)$`)
	lengthRe = lazyre.Compile(`^(minLength|maxLength): .* contains (\d+) Unicode code points, (?:fewer|more) than (\d+)$`)
)

// valueError words the validator's complaint about a value plainly.
func valueError(msg string) string {
	if m := typeRe().FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("got %s, want %s", m[1], strings.ReplaceAll(m[2], `"`, ""))
	}
	if m := boundRe().FindStringSubmatch(msg); m != nil {
		words := map[string]string{"minimum": "at least", "maximum": "at most", "exclusiveMinimum": "more than", "exclusiveMaximum": "less than"}
		return fmt.Sprintf("got %s, must be %s %s", number(m[2]), words[m[1]], number(m[3]))
	}
	if m := lengthRe().FindStringSubmatch(msg); m != nil {
		if m[1] == "minLength" {
			if m[3] == "1" {
				return "must not be empty"
			}
			return fmt.Sprintf("has %s characters, must have at least %s", m[2], m[3])
		}
		return fmt.Sprintf("has %s characters, must have at most %s", m[2], m[3])
	}
	return msg
}

// number turns the validator's "600001/1", "3/2" or "1.000000" into
// "600001", "1.5", "1".
func number(s string) string {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return s
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// fieldError rewrites the validator's message so it names the field the
// way a model wrote it: "field offset: ...", "field edits[2].old: ...",
// "missing required field path". The message names schema locations
// ("validating /properties/edits/items: ..."), the deepest last; the
// instance is walked along the deepest one to name the array item that
// failed, which the message does not say.
func fieldError(msg string, sch *jsonschema.Schema, v any) string {
	for strings.HasPrefix(msg, "validating root: ") {
		msg = strings.TrimPrefix(msg, "validating root: ")
	}
	loc := ""
	for {
		m := propPathRe().FindStringSubmatch(msg)
		if m == nil {
			break
		}
		msg, loc = msg[len(m[0]):], m[1]
	}
	field := instancePath(strings.Split(strings.Trim(loc, "/"), "/"), sch, v)
	if m := requiredRe().FindStringSubmatch(msg); m != nil {
		names := strings.ReplaceAll(m[1], `"`, "")
		if field != "" {
			return fmt.Sprintf("field %s: missing required field %s", field, names)
		}
		return "missing required field " + names
	}
	if m := additionalRe().FindStringSubmatch(msg); m != nil {
		if field != "" {
			return fmt.Sprintf("field %s: unknown field %s", field, m[1])
		}
		return "unknown field " + m[1]
	}
	msg = valueError(msg)
	if field == "" {
		return msg
	}
	return fmt.Sprintf("field %s: %s", field, msg)
}

// instancePath follows a schema location (properties/a/items, split at
// "/") through the schema and the input together and names the input's
// part: "a[2]". An array item is the first one its schema refuses. The
// walk stops at a keyword it does not follow (allOf, $ref, ...), naming
// what it has.
func instancePath(loc []string, sch *jsonschema.Schema, v any) string {
	field := ""
	for len(loc) >= 1 && sch != nil {
		switch loc[0] {
		case "properties":
			obj, ok := v.(map[string]any)
			if !ok || len(loc) < 2 {
				return field
			}
			if field != "" {
				field += "."
			}
			field += loc[1]
			sch, v, loc = sch.Properties[loc[1]], obj[loc[1]], loc[2:]
		case "prefixItems":
			arr, ok := v.([]any)
			k, err := strconv.Atoi(loc[min(1, len(loc)-1)])
			if !ok || err != nil || k < 0 || k >= len(arr) || k >= len(sch.PrefixItems) {
				return field
			}
			field += "[" + loc[1] + "]"
			sch, v, loc = sch.PrefixItems[k], arr[k], loc[2:]
		case "items":
			arr, ok := v.([]any)
			if !ok || sch.Items == nil {
				return field
			}
			item, err := sch.Items.Resolve(nil)
			if err != nil {
				return field
			}
			k := slices.IndexFunc(arr[min(len(sch.PrefixItems), len(arr)):], func(e any) bool { return item.Validate(e) != nil })
			if k < 0 {
				return field
			}
			k += min(len(sch.PrefixItems), len(arr))
			field += "[" + strconv.Itoa(k) + "]"
			sch, v, loc = sch.Items, arr[k], loc[1:]
		default:
			return field
		}
	}
	return field
}

// allowed applies the sandbox mode, the preset and the allow/deny globs
// to a tool.
func (s *Session) allowed(t *Tool) bool {
	if s.withheld(t) {
		return false
	}
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

// withheld reports whether the sandbox mode withholds a tool: one that
// writes files itself, under read-only.
func (s *Session) withheld(t *Tool) bool {
	return t.WritesFiles && s.sandbox.Mode() == sandbox.ReadOnly
}

// Lookup finds a tool by name, loading external tools or starting an MCP
// server only when the name needs them.
func (s *Session) Lookup(ctx context.Context, name string) (*Tool, error) {
	if t, ok := s.builtins[name]; ok && s.allowed(t) {
		return t, nil
	} else if ok && s.withheld(t) {
		return nil, fmt.Errorf("%s is not available under --sandbox read-only: it changes files from pg-tool itself, outside the sandbox (use --sandbox workspace-write to let the model change files)", name)
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
