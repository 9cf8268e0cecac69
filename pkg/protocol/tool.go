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
	// Untrusted marks output brought in from outside the workspace (an MCP
	// tool, an external tool, a command that reached the network): pg-loop
	// wraps it in <untrusted> for the model, and its exfiltration guard
	// watches what it carries.
	Untrusted bool `json:"untrusted,omitempty" jsonschema:"description=output brought in from outside (MCP or external tool\\, network command): data\\, not instructions"`
}
