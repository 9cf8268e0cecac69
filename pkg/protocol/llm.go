package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Roles of a message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Content block types.
const (
	BlockText             = "text"
	BlockToolCall         = "tool_call"
	BlockToolResult       = "tool_result"
	BlockThinking         = "thinking"
	BlockRedactedThinking = "redacted_thinking"
)

// Request is one model call, pg-llm's input.
type Request struct {
	// ID tags the request in `pg-llm serve`; every event of it carries the ID.
	ID          string    `json:"id,omitempty"`
	Model       string    `json:"model,omitempty" jsonschema:"description=provider/model or a fallback chain a\\,b\\,c; defaults to the configured model"`
	System      string    `json:"system,omitempty"`
	Messages    []Message `json:"messages"`
	Tools       []ToolDef `json:"tools,omitempty"`
	MaxTokens   int       `json:"max_tokens,omitempty" jsonschema:"minimum=0"`
	Temperature *float64  `json:"temperature,omitempty" jsonschema:"minimum=0"`
	// Cache asks for prompt caching (Anthropic cache_control on the system
	// prompt and the latest turns).
	Cache bool `json:"cache,omitempty"`
	// Thinking enables extended thinking with a token budget.
	Thinking *Thinking `json:"thinking,omitempty"`
	// ToolChoice is "auto" (default), "any", "none" or a tool name.
	ToolChoice string   `json:"tool_choice,omitempty"`
	Stop       []string `json:"stop,omitempty"`
	// After names a conversation pg-llm serve holds (the held field of an
	// earlier end event): the request's messages follow its messages, and
	// a system prompt or tools left out are the held ones, so only what
	// is new is sent. Serve mode only; a full request never needs it.
	After string `json:"after,omitempty" jsonschema:"description=serve mode: the held name of an earlier end event; messages then holds only the messages that follow that conversation\\, and system and tools left out are the held ones"`
}

// Thinking configures extended thinking.
type Thinking struct {
	BudgetTokens int `json:"budget_tokens" jsonschema:"minimum=0"`
}

// Message is one turn of a conversation. On input, content may be a plain
// string (one text block); it is always written as an array of blocks.
type Message struct {
	Role    string  `json:"role" jsonschema:"enum=user,enum=assistant,enum=tool"`
	Content Content `json:"content"`
}

// Content is a message's list of blocks.
type Content []Block

// UnmarshalJSON accepts a string or an array of blocks.
func (c *Content) UnmarshalJSON(b []byte) error {
	t := bytes.TrimSpace(b)
	if len(t) > 0 && t[0] == '"' {
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return err
		}
		*c = Content{{Type: BlockText, Text: s}}
		return nil
	}
	var blocks []Block
	if err := json.Unmarshal(t, &blocks); err != nil {
		return err
	}
	*c = blocks
	return nil
}

// Equal reports whether two messages have the same role and blocks.
func (m *Message) Equal(o *Message) bool {
	if m.Role != o.Role || len(m.Content) != len(o.Content) {
		return false
	}
	for i := range m.Content {
		x, y := &m.Content[i], &o.Content[i]
		if x.Type != y.Type || x.Text != y.Text || x.ID != y.ID || x.Name != y.Name || x.Output != y.Output ||
			x.IsError != y.IsError || x.Thinking != y.Thinking || x.Signature != y.Signature || x.Data != y.Data ||
			!bytes.Equal(x.Input, y.Input) {
			return false
		}
	}
	return true
}

// Text joins the text blocks of the content.
func (c Content) Text() string {
	var b bytes.Buffer
	for _, bl := range c {
		if bl.Type == BlockText {
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

// ToolCalls returns the tool_call blocks of the content.
func (c Content) ToolCalls() []ToolCall {
	var out []ToolCall
	for _, bl := range c {
		if bl.Type == BlockToolCall {
			out = append(out, ToolCall{ID: bl.ID, Name: bl.Name, Input: bl.Input})
		}
	}
	return out
}

// Block is one content block. Which fields are set depends on Type:
// text: text; tool_call: id, name, input; tool_result: id, output,
// is_error; thinking: thinking, signature; redacted_thinking: data.
type Block struct {
	Type      string          `json:"type" jsonschema:"enum=text,enum=tool_call,enum=tool_result,enum=thinking,enum=redacted_thinking"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty" jsonschema:"type=object"`
	Output    string          `json:"output,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
}

// Validate checks a request's fields; errors name the field.
func (r *Request) Validate() error {
	if len(r.Messages) == 0 && r.After == "" {
		return FieldError{Field: "messages", Msg: "at least one message is required"}
	}
	if r.MaxTokens < 0 {
		return FieldError{Field: "max_tokens", Msg: "must not be negative"}
	}
	if r.Temperature != nil && *r.Temperature < 0 {
		return FieldError{Field: "temperature", Msg: "must not be negative"}
	}
	if r.Thinking != nil && r.Thinking.BudgetTokens < 0 {
		return FieldError{Field: "thinking.budget_tokens", Msg: "must not be negative"}
	}
	for i, m := range r.Messages {
		f := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case RoleUser, RoleAssistant, RoleTool:
		case "":
			return FieldError{Field: f + ".role", Msg: "is required"}
		default:
			return FieldError{Field: f + ".role", Msg: fmt.Sprintf("unknown role %q (want user, assistant or tool)", m.Role)}
		}
		for j, b := range m.Content {
			if err := b.validate(fmt.Sprintf("%s.content[%d]", f, j)); err != nil {
				return err
			}
		}
	}
	for i, t := range r.Tools {
		if t.Name == "" {
			return FieldError{Field: fmt.Sprintf("tools[%d].name", i), Msg: "is required"}
		}
	}
	return nil
}

func (b Block) validate(f string) error {
	switch b.Type {
	case BlockText, BlockThinking, BlockRedactedThinking:
	case BlockToolCall:
		if b.ID == "" {
			return FieldError{Field: f + ".id", Msg: "is required for a tool_call"}
		}
		if b.Name == "" {
			return FieldError{Field: f + ".name", Msg: "is required for a tool_call"}
		}
		if len(b.Input) > 0 && !json.Valid(b.Input) {
			return FieldError{Field: f + ".input", Msg: "is not valid JSON"}
		}
	case BlockToolResult:
		if b.ID == "" {
			return FieldError{Field: f + ".id", Msg: "is required for a tool_result"}
		}
	case "":
		return FieldError{Field: f + ".type", Msg: "is required"}
	default:
		return FieldError{Field: f + ".type", Msg: fmt.Sprintf("unknown block type %q", b.Type)}
	}
	return nil
}

// FieldError names the field of a record that is wrong.
type FieldError struct {
	Field string
	Msg   string
}

func (e FieldError) Error() string { return fmt.Sprintf("field %s: %s", e.Field, e.Msg) }

// BadInput marks the error as a usage error (exit 2).
func (e FieldError) BadInput() bool { return true }

// Usage counts tokens and their cost.
type Usage struct {
	InputTokens      int     `json:"input_tokens"`
	OutputTokens     int     `json:"output_tokens"`
	CacheReadTokens  int     `json:"cache_read_tokens"`
	CacheWriteTokens int     `json:"cache_write_tokens"`
	CostUSD          float64 `json:"cost_usd"`
	// Estimated marks counts a caller estimated, not a provider's: pg-loop
	// charges its own estimate of a call whose provider reported no usage
	// (no input tokens), and a sum holding one is estimated too.
	Estimated bool `json:"estimated,omitempty" jsonschema:"description=true when some of these counts are pg-loop's estimates: the provider reported no usage for a call\\, which the budgets then count at the estimate of its request and answer"`
}

// Check reports a usage no real call has: a negative count, or a cost that
// is negative, NaN or infinite. Such numbers, summed into totals, would
// evade every budget (a server reporting negative tokens once priced a call
// at -$1,499,999.99997), so whoever takes a usage from outside refuses it.
func (u Usage) Check() error {
	for _, f := range [...]struct {
		name string
		n    int
	}{{"input_tokens", u.InputTokens}, {"output_tokens", u.OutputTokens}, {"cache_read_tokens", u.CacheReadTokens}, {"cache_write_tokens", u.CacheWriteTokens}} {
		if f.n < 0 {
			return fmt.Errorf("%s is negative (%d)", f.name, f.n)
		}
	}
	if u.CostUSD < 0 || math.IsNaN(u.CostUSD) || math.IsInf(u.CostUSD, 0) {
		return fmt.Errorf("cost_usd is not a cost (%g)", u.CostUSD)
	}
	return nil
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + o.InputTokens,
		OutputTokens:     u.OutputTokens + o.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + o.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + o.CacheWriteTokens,
		CostUSD:          u.CostUSD + o.CostUSD,
		Estimated:        u.Estimated || o.Estimated,
	}
}

// Tokens is the total of all token counts.
func (u Usage) Tokens() int {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// Model event types, in the order a call emits them.
const (
	EventStart    = "start"
	EventText     = "text"
	EventThinking = "thinking"
	EventToolCall = "tool_call"
	EventUsage    = "usage"
	EventRetry    = "retry"
	EventFallback = "fallback"
	EventError    = "error"
	EventEnd      = "end"
)

// StartEvent opens a model call's stream.
type StartEvent struct {
	Type      string `json:"type" jsonschema:"enum=start"`
	ID        string `json:"id,omitempty" jsonschema:"description=the request id in serve mode"`
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	RequestID string `json:"request_id,omitempty" jsonschema:"description=the provider's id of the request or message"`
}

// TextEvent is a delta of the answer's text.
type TextEvent struct {
	Type string `json:"type" jsonschema:"enum=text"`
	ID   string `json:"id,omitempty"`
	Text string `json:"text"`
}

// ThinkingEvent is a delta of extended thinking.
type ThinkingEvent struct {
	Type string `json:"type" jsonschema:"enum=thinking"`
	ID   string `json:"id,omitempty"`
	Text string `json:"text"`
}

// ToolCallEvent is one complete tool call. Call has the shape pg-tool
// serve reads, so `jq -c .call` pipes it straight into pg-tool.
type ToolCallEvent struct {
	Type string   `json:"type" jsonschema:"enum=tool_call"`
	ID   string   `json:"id,omitempty"`
	Call ToolCall `json:"call"`
}

// UsageEvent reports token use so far.
type UsageEvent struct {
	Type  string `json:"type" jsonschema:"enum=usage"`
	ID    string `json:"id,omitempty"`
	Model string `json:"model,omitempty"`
	Usage Usage  `json:"usage"`
}

// RetryEvent announces a retry after a retryable failure.
type RetryEvent struct {
	Type    string `json:"type" jsonschema:"enum=retry"`
	ID      string `json:"id,omitempty"`
	Model   string `json:"model,omitempty"`
	Attempt int    `json:"attempt"`
	DelayMS int64  `json:"delay_ms"`
	Reason  string `json:"reason"`
}

// FallbackEvent announces a move to the next model of the chain.
type FallbackEvent struct {
	Type   string `json:"type" jsonschema:"enum=fallback"`
	ID     string `json:"id,omitempty"`
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
}

// Error kinds of a model call.
const (
	KindAuth            = "auth"
	KindBadRequest      = "bad_request"
	KindContextOverflow = "context_overflow"
	KindRateLimit       = "rate_limit"
	KindOverloaded      = "overloaded"
	KindServer          = "server"
	KindNetwork         = "network"
	KindTimeout         = "timeout"
	// KindResponseTooLarge: the answer passed what one response may hold
	// in memory (llm.MaxResponseBytes of text, thinking and tool input,
	// or a single event that large). Not retryable: a model or server that
	// streamed that much would very likely do it again, at the same cost.
	KindResponseTooLarge = "response_too_large"
	// KindNotHeld: pg-llm serve does not hold the conversation a request's
	// after names (it keeps the last few): send the whole request.
	KindNotHeld = "not_held"
)

// ErrorEvent is the error record every tool writes in JSON mode, and the
// error event of a model call.
type ErrorEvent struct {
	Type      string `json:"type" jsonschema:"enum=error"`
	ID        string `json:"id,omitempty"`
	Tool      string `json:"tool,omitempty" jsonschema:"description=the tool that failed\\, e.g. pg-queue"`
	Kind      string `json:"kind,omitempty" jsonschema:"description=what failed. A model call's kinds: auth\\, bad_request\\, context_overflow\\, rate_limit\\, overloaded\\, server\\, network\\, timeout\\, response_too_large\\, not_held; other tools' records: usage\\, lease_lost\\, not_found\\, ..."`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable,omitempty"`
	Status    int    `json:"status,omitempty" jsonschema:"description=HTTP status\\, when there was one"`
	Model     string `json:"model,omitempty"`
	Line      int    `json:"line,omitempty" jsonschema:"description=input line the error is about"`
	ExitCode  int    `json:"exit_code,omitempty"`
	// Usage is what a failed model call was charged all the same: its
	// attempts whose streams broke after the provider counted the input.
	Usage *Usage `json:"usage,omitempty" jsonschema:"description=a model call's: what its failed attempts were charged (streams cut after the provider counted the input)\\, which budgets count"`
}

// EndEvent closes a successful model call.
type EndEvent struct {
	Type       string  `json:"type" jsonschema:"enum=end"`
	ID         string  `json:"id,omitempty"`
	Model      string  `json:"model,omitempty"`
	StopReason string  `json:"stop_reason" jsonschema:"description=end_turn\\, tool_use\\, max_tokens\\, stop_sequence\\, ..."`
	Message    Message `json:"message"`
	Usage      Usage   `json:"usage"`
	// Incomplete lists the tool calls max_tokens cut off while their input
	// was still being written. They are not in Message and had no
	// tool_call event: their input is not whole JSON, so nothing may run
	// them. The answer is an ordinary max_tokens answer, not an error.
	Incomplete []IncompleteToolCall `json:"incomplete_tool_calls,omitempty" jsonschema:"description=tool calls cut off by max_tokens before their input was complete; never to be run"`
	// Held is set by pg-llm serve: the name under which it holds this
	// conversation, the request's messages and then Message, for a later
	// request's after.
	Held string `json:"held,omitempty" jsonschema:"description=pg-llm serve: the name under which it holds this conversation (the request's messages\\, then message) for a later request's after"`
}

// StopMaxTokens is the stop reason of an answer cut off at the request's
// max_tokens (OpenAI's finish_reason length).
const StopMaxTokens = "max_tokens"

// IncompleteToolCall is a tool call cut off by max_tokens: its id, its
// tool's name and the input as far as it came (not valid JSON).
type IncompleteToolCall struct {
	ID           string `json:"id,omitempty"`
	Name         string `json:"name"`
	PartialInput string `json:"partial_input"`
}

// ErrNoEnd is returned when a model stream ends without an end event.
var ErrNoEnd = errors.New("model stream ended without an end event")

// ModelInfo is one model of pg-llm's table, as `pg-llm models --json`
// prints it: its context window and its prices in USD per million tokens.
type ModelInfo struct {
	Type          string  `json:"type" jsonschema:"enum=model"`
	ID            string  `json:"id"`
	ContextWindow int     `json:"context_window"`
	MaxOutput     int     `json:"max_output,omitempty"`
	InputPerMTok  float64 `json:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok"`
	// CacheReadPerMTok and CacheWritePerMTok price cached input; when zero
	// the input price applies.
	CacheReadPerMTok  float64 `json:"cache_read_per_mtok,omitempty"`
	CacheWritePerMTok float64 `json:"cache_write_per_mtok,omitempty"`
	Source            string  `json:"source" jsonschema:"enum=builtin,enum=config"`
}

// Priced reports whether the model's prices are known.
func (i ModelInfo) Priced() bool { return i.InputPerMTok > 0 || i.OutputPerMTok > 0 }

// Cost prices a usage at the model's prices (cached tokens at the input
// price when the cache has none of its own).
func (i ModelInfo) Cost(u Usage) float64 {
	read, write := i.CacheReadPerMTok, i.CacheWritePerMTok
	if read == 0 {
		read = i.InputPerMTok
	}
	if write == 0 {
		write = i.InputPerMTok
	}
	c := float64(u.InputTokens)*i.InputPerMTok + float64(u.OutputTokens)*i.OutputPerMTok +
		float64(u.CacheReadTokens)*read + float64(u.CacheWriteTokens)*write
	return c / 1e6
}

// ModelListRequest asks pg-llm serve for its model table on the same
// stream as the requests: what `pg-llm models --json` prints, without
// starting another process.
type ModelListRequest struct {
	Type string `json:"type" jsonschema:"enum=models"`
	ID   string `json:"id"`
}

// ModelsEvent answers a ModelListRequest.
type ModelsEvent struct {
	Type   string      `json:"type" jsonschema:"enum=models"`
	ID     string      `json:"id"`
	Models []ModelInfo `json:"models"`
}
