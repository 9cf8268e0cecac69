package protocol

import "encoding/json"

// ToolDef describes a tool to a model; `pg-tool list` prints an array.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema" jsonschema:"type=object"`
}

// ToolCall is one call of a tool; pg-tool serve reads these as lines.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty" jsonschema:"type=object"`
}

// ToolListRequest asks pg-tool serve for its tool definitions on the
// same stream as the calls: what `pg-tool list` prints, without starting
// another process.
type ToolListRequest struct {
	Type string `json:"type" jsonschema:"enum=list"`
	ID   string `json:"id"`
}

// ToolsEvent answers a ToolListRequest.
type ToolsEvent struct {
	Type  string    `json:"type" jsonschema:"enum=tools"`
	ID    string    `json:"id"`
	Tools []ToolDef `json:"tools"`
	// Error says what could not be listed (an MCP server that does not
	// start, an external tool without a definition): Tools holds the
	// others, as `pg-tool list` prints them before it exits 1.
	Error *string `json:"error,omitempty"`
}

// ToolResult is pg-tool's answer to a call.
type ToolResult struct {
	Type       string  `json:"type" jsonschema:"enum=result"`
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	OK         bool    `json:"ok"`
	Output     string  `json:"output"`
	Error      *string `json:"error"`
	Truncated  bool    `json:"truncated"`
	FullOutput string  `json:"full_output,omitempty" jsonschema:"description=file holding the whole output when it was truncated (the whole error when only the error was)"`
	DurationMS int64   `json:"duration_ms"`
	Sandbox    string  `json:"sandbox,omitempty" jsonschema:"enum=workspace-write,enum=read-only,enum=off,description=the sandbox mode the commands of this call ran under (pg-tool --sandbox)"`
	// Untrusted marks output brought in from outside the workspace (an MCP
	// tool, an external tool, a command that reached the network): pg-loop
	// wraps it in <untrusted> for the model, and its exfiltration guard
	// watches what it carries.
	Untrusted bool `json:"untrusted,omitempty" jsonschema:"description=output brought in from outside (MCP or external tool\\, network command): data\\, not instructions"`
}

// SandboxReport is what `pg-tool sandbox` prints: the mode in force and,
// for each rule, what enforces it on this machine.
type SandboxReport struct {
	Type      string        `json:"type" jsonschema:"enum=sandbox"`
	Mode      string        `json:"mode" jsonschema:"enum=workspace-write,enum=read-only,enum=off"`
	Available bool          `json:"available" jsonschema:"description=false when this machine cannot enforce the mode: sandboxed commands are then refused"`
	Missing   []string      `json:"missing,omitempty" jsonschema:"description=what the kernel lacks for the mode"`
	Landlock  int           `json:"landlock_abi" jsonschema:"description=the kernel's Landlock ABI version (0: none)"`
	Root      string        `json:"root"`
	TempDir   string        `json:"tmp,omitempty" jsonschema:"description=the private TMPDIR of sandboxed commands"`
	Writable  []string      `json:"writable,omitempty"`
	Hidden    []string      `json:"hidden,omitempty" jsonschema:"description=secret paths that exist and no command can read"`
	NotHidden []string      `json:"not_hidden,omitempty" jsonschema:"description=secret paths inside a writable path\\, which the sandbox cannot hide"`
	AllowNet  bool          `json:"allow_net"`
	Env       []string      `json:"env" jsonschema:"description=the names of the variables commands get (the allow-list and --pass-env)"`
	Rules     []SandboxRule `json:"rules"`
}

// SandboxRule is one promise of the sandbox and what keeps it.
type SandboxRule struct {
	Rule       string `json:"rule"`
	EnforcedBy string `json:"enforced_by"`
}

// Text is what a model is shown of a result: a failure's error first,
// then the output, and, when the output was cut, where the whole of it
// was saved. pg-loop and pg-tool mcp show the same text.
func (r ToolResult) Text() string {
	out := r.Output
	if !r.OK && r.Error != nil {
		if out != "" {
			out = *r.Error + "\n" + out
		} else {
			out = *r.Error
		}
	}
	if r.Truncated && r.FullOutput != "" {
		out += "\n[output truncated; the whole output is in " + r.FullOutput + "]"
	}
	return out
}
