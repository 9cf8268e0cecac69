package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/tidwall/gjson"
)

// Anthropic calls the Messages API, streaming. It does not retry: the
// Router retries, so each retry is an event.
type Anthropic struct {
	name   string
	url    string
	header http.Header
	hc     *http.Client
	cache  *encodingCache
}

// anthropicVersion is the API version the body and the stream follow.
const anthropicVersion = "2023-06-01"

// NewAnthropic returns the provider; base may be empty (api.anthropic.com).
func NewAnthropic(name, key, base string, hc *http.Client) *Anthropic {
	if base == "" {
		base = "https://api.anthropic.com"
	}
	h := http.Header{}
	h.Set("X-Api-Key", key)
	h.Set("Anthropic-Version", anthropicVersion)
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	return &Anthropic{name: name, url: strings.TrimSuffix(base, "/") + "/v1/messages", header: h, hc: hc, cache: newEncodingCache()}
}

// The blocks of the Messages API a request sends, with the fields in the
// order the API documents them.
type (
	anthropicTextParam struct {
		Text string `json:"text"`
		Type string `json:"type"`
	}
	anthropicToolUseParam struct {
		ID    string          `json:"id"`
		Input json.RawMessage `json:"input"`
		Name  string          `json:"name"`
		Type  string          `json:"type"`
	}
	anthropicToolResultParam struct {
		ToolUseID string `json:"tool_use_id"`
		Content   string `json:"content,omitempty"`
		IsError   bool   `json:"is_error,omitempty"`
		Type      string `json:"type"`
	}
	anthropicThinkingParam struct {
		Signature string `json:"signature"`
		Thinking  string `json:"thinking"`
		Type      string `json:"type"`
	}
	anthropicRedactedParam struct {
		Data string `json:"data"`
		Type string `json:"type"`
	}
	anthropicSystemParam struct {
		Text         string          `json:"text"`
		CacheControl *anthropicCache `json:"cache_control,omitempty"`
		Type         string          `json:"type"`
	}
	anthropicToolParam struct {
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
		Name        string          `json:"name"`
	}
	anthropicCache struct {
		Type string `json:"type"`
	}
	anthropicToolChoice struct {
		Name string `json:"name,omitempty"`
		Type string `json:"type"`
	}
	anthropicThinkingConfig struct {
		BudgetTokens int    `json:"budget_tokens"`
		Type         string `json:"type"`
	}
	// anthropicRest is everything of a request but its model, max_tokens
	// and messages.
	// anthropicRest is what follows the messages, system and tools (which
	// are written from their cached encodings: through the encoder, a
	// json.RawMessage is scanned again every call).
	anthropicRest struct {
		ToolChoice    *anthropicToolChoice     `json:"tool_choice,omitempty"`
		Thinking      *anthropicThinkingConfig `json:"thinking,omitempty"`
		Temperature   *float64                 `json:"temperature,omitempty"`
		StopSequences []string                 `json:"stop_sequences,omitempty"`
		Stream        bool                     `json:"stream"`
	}
)

// cacheBreakpoint is what a block that ends a cached prefix carries.
const cacheBreakpoint = `,"cache_control":{"type":"ephemeral"}}`

// anthropicMessage encodes one message's blocks, comma-separated (the
// turn around them is written by anthropicBody, which joins the messages
// of one role). last is set when the last block can carry a cache
// breakpoint.
func anthropicMessage(m *protocol.Message) (wireMessage, error) {
	var (
		out  []byte
		last bool
		err  error
	)
	for _, b := range m.Content {
		var v any
		switch b.Type {
		case protocol.BlockText:
			if b.Text == "" {
				continue // the API refuses empty text blocks
			}
			v, last = anthropicTextParam{Text: b.Text, Type: "text"}, true
		case protocol.BlockToolCall:
			in := b.Input
			if len(in) == 0 {
				in = json.RawMessage("{}")
			}
			v, last = anthropicToolUseParam{ID: b.ID, Input: in, Name: b.Name, Type: "tool_use"}, true
		case protocol.BlockToolResult:
			v, last = anthropicToolResultParam{ToolUseID: b.ID, Content: b.Output, IsError: b.IsError, Type: "tool_result"}, true
		case protocol.BlockThinking:
			// Thinking without Anthropic's signature came from another
			// provider (reasoning_content of an OpenAI-compatible model
			// before a fallback): the API would reject it with a 400.
			if b.Signature == "" {
				continue
			}
			v, last = anthropicThinkingParam{Signature: b.Signature, Thinking: b.Thinking, Type: "thinking"}, false
		case protocol.BlockRedactedThinking:
			v, last = anthropicRedactedParam{Data: b.Data, Type: "redacted_thinking"}, false
		default:
			continue
		}
		if len(out) > 0 {
			out = append(out, ',')
		}
		if out, err = appendJSON(out, v); err != nil {
			return wireMessage{}, err
		}
	}
	return wireMessage{b: out, last: last}, nil
}

func anthropicTools(defs []protocol.ToolDef) ([]byte, error) {
	tools := make([]anthropicToolParam, len(defs))
	for i, t := range defs {
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		tools[i] = anthropicToolParam{Name: t.Name, Description: t.Description, InputSchema: schema}
	}
	return appendJSON(nil, tools)
}

// anthropicBody builds the Messages API request body.
func (a *Anthropic) body(model string, req *protocol.Request) ([]byte, error) {
	wire, err := a.cache.messages(req.Messages, anthropicMessage)
	if err != nil {
		return nil, err
	}
	// The API wants turns to alternate; tool results are user turns, so
	// a tool message followed by a user message becomes one turn.
	type turn struct {
		user      bool
		msgs      []int
		breakOnto bool // a cache breakpoint on its last block
	}
	var turns []turn
	size := 0
	for i, w := range wire {
		if len(w.b) == 0 {
			continue
		}
		size += len(w.b) + 1
		user := req.Messages[i].Role != protocol.RoleAssistant
		if n := len(turns); n > 0 && turns[n-1].user == user {
			turns[n-1].msgs = append(turns[n-1].msgs, i)
			continue
		}
		turns = append(turns, turn{user: user, msgs: []int{i}})
	}
	if req.Cache {
		// Breakpoints on the last two user turns: the newest is written, the
		// one before it was written by the previous call and is read.
		marked := 0
		for i := len(turns) - 1; i >= 0 && marked < 2; i-- {
			t := &turns[i]
			if t.user && wire[t.msgs[len(t.msgs)-1]].last {
				t.breakOnto = true
				marked++
			}
		}
	}
	rest := anthropicRest{Stream: true, StopSequences: req.Stop}
	var system, tools []byte
	if req.System != "" {
		if system, err = a.cache.systemPrompt(req.System, req.Cache, anthropicSystem); err != nil {
			return nil, err
		}
	}
	if len(req.Tools) > 0 {
		if tools, err = a.cache.toolDefs(req.Tools, anthropicTools); err != nil {
			return nil, err
		}
		if req.Cache && req.System == "" {
			// The breakpoint goes on the last tool.
			tools = append(append(tools[:len(tools)-2:len(tools)-2], cacheBreakpoint...), ']')
		}
	}
	thinking := req.Thinking != nil && req.Thinking.BudgetTokens > 0
	if req.Temperature != nil && !thinking { // the API takes no temperature with thinking
		rest.Temperature = req.Temperature
	}
	if thinking {
		rest.Thinking = &anthropicThinkingConfig{BudgetTokens: req.Thinking.BudgetTokens, Type: "enabled"}
	}
	switch req.ToolChoice {
	case "", "auto":
	case "any", "none":
		rest.ToolChoice = &anthropicToolChoice{Type: req.ToolChoice}
	default:
		rest.ToolChoice = &anthropicToolChoice{Name: req.ToolChoice, Type: "tool"}
	}

	body := make([]byte, 0, size+len(turns)*40+len(system)+len(tools)+256)
	body = append(body, `{"max_tokens":`...)
	body = strconv.AppendInt(body, int64(req.MaxTokens), 10)
	body = append(body, `,"model":`...)
	if body, err = appendJSON(body, model); err != nil {
		return nil, err
	}
	body = append(body, `,"messages":[`...)
	for i, t := range turns {
		if i > 0 {
			body = append(body, ',')
		}
		if t.user {
			body = append(body, `{"role":"user","content":[`...)
		} else {
			body = append(body, `{"role":"assistant","content":[`...)
		}
		for j, k := range t.msgs {
			if j > 0 {
				body = append(body, ',')
			}
			b := wire[k].b
			if t.breakOnto && j == len(t.msgs)-1 {
				body = append(append(body, b[:len(b)-1]...), cacheBreakpoint...)
				continue
			}
			body = append(body, b...)
		}
		body = append(body, "]}"...)
	}
	body = append(body, "],"...)
	if system != nil {
		body = append(append(append(body, `"system":`...), system...), ',')
	}
	if tools != nil {
		body = append(append(append(body, `"tools":`...), tools...), ',')
	}
	restJSON, err := appendJSON(nil, rest)
	if err != nil {
		return nil, err
	}
	return append(body, restJSON[1:]...), nil
}

// anthropicSystem encodes the system prompt as one text block.
func anthropicSystem(text string, cache bool) ([]byte, error) {
	sys := anthropicSystemParam{Text: text, Type: "text"}
	if cache {
		sys.CacheControl = &anthropicCache{Type: "ephemeral"}
	}
	return appendJSON(nil, []anthropicSystemParam{sys})
}

// Stream runs one attempt.
func (a *Anthropic) Stream(ctx context.Context, model string, req *protocol.Request, em *Emitter) (*protocol.EndEvent, error) {
	body, err := a.body(model, req)
	if err != nil {
		return nil, &Error{Kind: protocol.KindBadRequest, Message: "anthropic: request: " + err.Error(), Err: err}
	}
	ctx, cancel := context.WithCancel(ctx) // finishBody's way to give up on a stalled body
	defer cancel()
	resp, err := post(ctx, a.hc, a.url, a.header, body, anthropicHTTPError)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	em.Start(a.name, em.Model, resp.Header.Get("request-id"))
	end, err := decodeAnthropic(resp.Body, em)
	if err == nil {
		finishBody(resp.Body, cancel)
	}
	return end, err
}

// anthropicEvent holds the fields of every Messages stream event that
// matter here.
type anthropicEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		ID    string         `json:"id"`
		Usage anthropicUsage `json:"usage"`
	} `json:"message"`
	ContentBlock *struct {
		Type      string `json:"type"`
		Text      string `json:"text"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
		Data      string `json:"data"`
		ID        string `json:"id"`
		Name      string `json:"name"`
	} `json:"content_block"`
	Delta *anthropicDeltaField `json:"delta"`
	Usage *anthropicUsage      `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type anthropicDeltaField struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	PartialJSON string `json:"partial_json"`
	Thinking    string `json:"thinking"`
	Signature   string `json:"signature"`
	StopReason  string `json:"stop_reason"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
}

// decodeAnthropic reads a Messages event stream, assembles the message and
// emits content as it completes: text and thinking deltas at once, a tool
// call when its block stops (its input arrives as input_json_delta
// fragments). A stream that ends before message_stop is cut off; an error
// event is a failure even after HTTP 200.
func decodeAnthropic(body io.Reader, em *Emitter) (_ *protocol.EndEvent, err error) {
	d := &anthropicStream{em: em, end: &protocol.EndEvent{Message: protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Content{}}}}
	defer func() {
		if err != nil { // the input message_start counted is charged all the same
			em.brokenUsage(d.end.Usage)
		}
	}()
	sse := newSSEReader(body, em.limit(), em.wait)
	for {
		name, data, err := sse.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrTruncated
			}
			return nil, err
		}
		if string(name) == "ping" || len(data) == 0 {
			continue
		}
		if string(name) == "content_block_delta" && gjson.ValidBytes(data) {
			if err := d.fastDelta(data); err != nil {
				return nil, err
			}
			continue
		}
		var ev anthropicEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, badStream("anthropic stream: event %q: %v", name, err)
		}
		if string(name) == "error" || ev.Type == "error" {
			return nil, streamError("anthropic", ev.errorType(), string(data))
		}
		if end, err := d.event(&ev); end != nil || err != nil {
			return end, err
		}
	}
}

// anthropicStream is the message a Messages stream is assembling: its
// content blocks by index and its end (usage, stop reason).
type anthropicStream struct {
	em     *Emitter
	blocks []*anthropicBlock
	end    *protocol.EndEvent
}

// event applies one decoded event; at message_stop it returns the end.
func (d *anthropicStream) event(ev *anthropicEvent) (*protocol.EndEvent, error) {
	switch ev.Type {
	case "message_start":
		d.start(ev)
	case "content_block_start":
		return nil, d.startBlock(ev)
	case "content_block_delta":
		b, err := d.at(ev.Index)
		if err != nil || ev.Delta == nil {
			return nil, err
		}
		return nil, d.delta(b, ev.Delta)
	case "content_block_stop":
		return nil, d.stopBlock(ev.Index)
	case "message_delta":
		d.messageDelta(ev)
	case "message_stop":
		return d.finish()
	}
	return nil, nil
}

// fastDelta applies a content_block_delta, the hot path: most events are
// deltas, and gjson reads their few fields without encoding/json's
// per-call allocations.
func (d *anthropicStream) fastDelta(data []byte) error {
	f := gjson.GetManyBytes(data, "index", "delta.type", "delta.text", "delta.partial_json", "delta.thinking", "delta.signature")
	b, err := d.at(int(f[0].Int()))
	if err != nil {
		return err
	}
	return d.delta(b, &anthropicDeltaField{Type: f[1].Str, Text: f[2].Str, PartialJSON: f[3].Str, Thinking: f[4].Str, Signature: f[5].Str})
}

// at is the content block of an event's index.
func (d *anthropicStream) at(i int) (*anthropicBlock, error) {
	if i < 0 || i >= len(d.blocks) {
		return nil, badStream("anthropic stream: event for unknown content block %d", i)
	}
	return d.blocks[i], nil
}

// start takes the usage message_start reports (the input counted so far).
func (d *anthropicStream) start(ev *anthropicEvent) {
	if ev.Message != nil {
		u := ev.Message.Usage
		d.end.Usage = protocol.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
	}
}

// startBlock opens the next content block, in order; text and thinking it
// starts with are emitted at once.
func (d *anthropicStream) startBlock(ev *anthropicEvent) error {
	cb := ev.ContentBlock
	if cb == nil {
		return badStream("anthropic stream: content_block_start without a content_block")
	}
	if ev.Index != len(d.blocks) {
		return badStream("anthropic stream: content block %d started out of order", ev.Index)
	}
	if err := d.em.hold(len(cb.Text) + len(cb.Thinking) + len(cb.Signature) + len(cb.Data) + len(cb.ID) + len(cb.Name)); err != nil {
		return err
	}
	b := &anthropicBlock{}
	switch cb.Type {
	case "text":
		b.b = protocol.Block{Type: protocol.BlockText}
		b.text.WriteString(cb.Text)
		d.em.Text(cb.Text)
	case "thinking":
		b.b = protocol.Block{Type: protocol.BlockThinking, Signature: cb.Signature}
		b.text.WriteString(cb.Thinking)
		d.em.Thinking(cb.Thinking)
	case "redacted_thinking":
		b.b = protocol.Block{Type: protocol.BlockRedactedThinking, Data: cb.Data}
	case "tool_use":
		// Without both the call could not be answered: the tool
		// result must name the id, and a caller runs tools by name.
		if cb.ID == "" || cb.Name == "" {
			return badStream("anthropic stream: tool_use block %d without an id or a name", ev.Index)
		}
		b.b = protocol.Block{Type: protocol.BlockToolCall, ID: cb.ID, Name: cb.Name}
	default: // server tool blocks and future types are not ours to replay
		b.b = protocol.Block{Type: cb.Type}
	}
	d.blocks = append(d.blocks, b)
	return nil
}

// delta adds a fragment to its block; text and thinking are emitted as
// they come, a tool call's input waits for the block to stop.
func (d *anthropicStream) delta(b *anthropicBlock, f *anthropicDeltaField) error {
	if err := d.em.hold(len(f.Text) + len(f.PartialJSON) + len(f.Thinking) + len(f.Signature)); err != nil {
		return err
	}
	switch f.Type {
	case "text_delta":
		b.text.WriteString(f.Text)
		d.em.Text(f.Text)
	case "input_json_delta":
		b.text.WriteString(f.PartialJSON)
	case "thinking_delta":
		b.text.WriteString(f.Thinking)
		d.em.Thinking(f.Thinking)
	case "signature_delta":
		b.b.Signature += f.Signature
	}
	return nil
}

// stopBlock closes a block: a tool call's input is parsed and the call
// emitted. Input that does not parse is an error only if the message does
// not stop for max_tokens, which cuts the input where it was (see finish).
func (d *anthropicStream) stopBlock(i int) error {
	b, err := d.at(i)
	if err != nil {
		return err
	}
	if b.b.Type != protocol.BlockToolCall || b.b.Input != nil || b.bad != nil {
		return nil
	}
	in, err := parseInput(b.text.String())
	if err != nil {
		b.bad = badStream("anthropic stream: tool call %s: %v", b.b.Name, err)
		return nil
	}
	b.b.Input = in
	d.em.ToolCall(protocol.ToolCall{ID: b.b.ID, Name: b.b.Name, Input: in})
	return nil
}

// messageDelta takes the stop reason and the usage message_delta reports.
func (d *anthropicStream) messageDelta(ev *anthropicEvent) {
	if ev.Delta != nil {
		d.end.StopReason = ev.Delta.StopReason
	}
	if u := ev.Usage; u != nil {
		d.end.Usage.OutputTokens = u.OutputTokens
		// Newer streams repeat the cumulative input counts here.
		if u.InputTokens > 0 {
			d.end.Usage.InputTokens = u.InputTokens
		}
		if u.CacheReadInputTokens > 0 {
			d.end.Usage.CacheReadTokens = u.CacheReadInputTokens
		}
		if u.CacheCreationInputTokens > 0 {
			d.end.Usage.CacheWriteTokens = u.CacheCreationInputTokens
		}
	}
}

// finish assembles the message at message_stop. A tool call that never
// stopped, or whose input does not parse, is reported as incomplete when
// max_tokens cut it (never offered for execution), an error otherwise.
func (d *anthropicStream) finish() (*protocol.EndEvent, error) {
	end := d.end
	for _, b := range d.blocks {
		switch b.b.Type {
		case protocol.BlockText:
			b.b.Text = b.text.String()
		case protocol.BlockThinking:
			b.b.Thinking = b.text.String()
		case protocol.BlockToolCall:
			if b.b.Input != nil {
				break
			}
			if end.StopReason == protocol.StopMaxTokens {
				end.Incomplete = append(end.Incomplete, protocol.IncompleteToolCall{ID: b.b.ID, Name: b.b.Name, PartialInput: b.text.String()})
				continue
			}
			if b.bad != nil {
				return nil, b.bad
			}
			return nil, badStream("anthropic stream: tool call %s never stopped", b.b.Name)
		case protocol.BlockRedactedThinking:
		default:
			continue
		}
		end.Message.Content = append(end.Message.Content, b.b)
	}
	if end.StopReason == "" {
		end.StopReason = "end_turn"
	}
	return end, nil
}

// anthropicBlock is a content block being assembled.
type anthropicBlock struct {
	b    protocol.Block
	text strings.Builder // text, thinking or tool input JSON as it arrives
	bad  error           // a tool call's input that stopped but does not parse
}

func (ev *anthropicEvent) errorType() string {
	if ev.Error != nil {
		return ev.Error.Type
	}
	return ""
}

// streamError classifies an error event inside a 200 stream: retryable
// unless the provider calls it a bad request.
func streamError(provider, errType, raw string) *Error {
	e := classifyHTTP(0, errType, raw, nil)
	if e.Kind == protocol.KindBadRequest && errType != "invalid_request_error" {
		e.Kind, e.Retryable = protocol.KindServer, true
	}
	e.Message = "error event in stream: " + apiMessage(0, raw)
	return e
}

// anthropicHTTPError classifies an error response, such as
// {"type":"error","error":{"type":"overloaded_error","message":"..."}}.
func anthropicHTTPError(status int, body []byte, h http.Header) *Error {
	e := classifyHTTP(status, gjson.GetBytes(body, "error.type").String(), string(body), h)
	e.Message = apiMessage(status, string(body))
	return e
}
