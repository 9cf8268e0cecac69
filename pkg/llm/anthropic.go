package llm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/tidwall/gjson"
)

// Anthropic calls the Messages API through the official SDK, streaming.
// The SDK's own retries are off: the Router retries, so each retry is an
// event.
type Anthropic struct {
	name     string
	messages anthropic.MessageService
}

// NewAnthropic returns the provider; base may be empty (api.anthropic.com).
func NewAnthropic(name, key, base string, hc *http.Client) *Anthropic {
	// The message service alone, not anthropic.NewClient: the client
	// reaches every API of the SDK, which keeps them all in the binary
	// (tens of MB, slower start), and reads ANTHROPIC_* from the process
	// environment behind the configuration's back.
	opts := []option.RequestOption{
		option.WithEnvironmentProduction(),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithHTTPClient(hc),
	}
	if base != "" {
		opts = append(opts, option.WithBaseURL(base))
	}
	return &Anthropic{name: name, messages: anthropic.NewMessageService(opts...)}
}

// anthropicParams converts a request to the Messages API's parameters. The
// tools go in as raw JSON (toolsJSON) so their schemas pass unchanged.
func anthropicParams(model string, req *protocol.Request) (anthropic.MessageNewParams, []map[string]any) {
	p := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: int64(req.MaxTokens)}
	if req.System != "" {
		sys := anthropic.TextBlockParam{Text: req.System}
		if req.Cache {
			sys.CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
		p.System = []anthropic.TextBlockParam{sys}
	}
	for _, m := range req.Messages {
		role := anthropic.MessageParamRoleUser
		if m.Role == protocol.RoleAssistant {
			role = anthropic.MessageParamRoleAssistant
		}
		var blocks []anthropic.ContentBlockParamUnion
		for _, b := range m.Content {
			switch b.Type {
			case protocol.BlockText:
				if b.Text != "" {
					blocks = append(blocks, anthropic.NewTextBlock(b.Text))
				}
			case protocol.BlockToolCall:
				in := b.Input
				if len(in) == 0 {
					in = json.RawMessage("{}")
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(b.ID, in, b.Name))
			case protocol.BlockToolResult:
				blocks = append(blocks, anthropic.NewToolResultBlock(b.ID, b.Output, b.IsError))
			case protocol.BlockThinking:
				// Thinking without Anthropic's signature came from another
				// provider (reasoning_content of an OpenAI-compatible model
				// before a fallback): the API would reject it with a 400.
				if b.Signature == "" {
					continue
				}
				blocks = append(blocks, anthropic.NewThinkingBlock(b.Signature, b.Thinking))
			case protocol.BlockRedactedThinking:
				blocks = append(blocks, anthropic.NewRedactedThinkingBlock(b.Data))
			}
		}
		if len(blocks) == 0 {
			continue
		}
		// The API wants turns to alternate; tool results are user turns, so
		// a tool message followed by a user message becomes one turn.
		if n := len(p.Messages); n > 0 && p.Messages[n-1].Role == role {
			p.Messages[n-1].Content = append(p.Messages[n-1].Content, blocks...)
			continue
		}
		p.Messages = append(p.Messages, anthropic.MessageParam{Role: role, Content: blocks})
	}
	if req.Cache {
		// Breakpoints on the last two user turns: the newest is written, the
		// one before it was written by the previous call and is read.
		marked := 0
		for i := len(p.Messages) - 1; i >= 0 && marked < 2; i-- {
			if p.Messages[i].Role != anthropic.MessageParamRoleUser {
				continue
			}
			c := p.Messages[i].Content
			if cc := c[len(c)-1].GetCacheControl(); cc != nil {
				*cc = anthropic.NewCacheControlEphemeralParam()
				marked++
			}
		}
	}
	thinking := req.Thinking != nil && req.Thinking.BudgetTokens > 0
	if req.Temperature != nil && !thinking { // the API takes no temperature with thinking
		p.Temperature = anthropic.Float(*req.Temperature)
	}
	if thinking {
		p.Thinking = anthropic.ThinkingConfigParamOfEnabled(int64(req.Thinking.BudgetTokens))
	}
	if len(req.Stop) > 0 {
		p.StopSequences = req.Stop
	}
	switch req.ToolChoice {
	case "", "auto":
	case "any":
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
	case "none":
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
	default:
		p.ToolChoice = anthropic.ToolChoiceParamOfTool(req.ToolChoice)
	}
	var tools []map[string]any
	for i, t := range req.Tools {
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		tool := map[string]any{"name": t.Name, "input_schema": schema}
		if t.Description != "" {
			tool["description"] = t.Description
		}
		if req.Cache && i == len(req.Tools)-1 && req.System == "" {
			tool["cache_control"] = map[string]string{"type": "ephemeral"}
		}
		tools = append(tools, tool)
	}
	return p, tools
}

// Stream runs one attempt.
func (a *Anthropic) Stream(ctx context.Context, model string, req *protocol.Request, em *Emitter) (*protocol.EndEvent, error) {
	params, tools := anthropicParams(model, req)
	var resp *http.Response
	tap := &bodyTap{}
	ctx, cancel := context.WithCancel(ctx) // finishBody's way to give up on a stalled body
	defer cancel()
	opts := []option.RequestOption{option.WithResponseInto(&resp), option.WithMiddleware(tap.middleware)}
	if len(tools) > 0 {
		opts = append(opts, option.WithJSONSet("tools", tools))
	}
	stream := a.messages.NewStreaming(ctx, params, opts...)
	body := tap.take()
	if body != nil {
		defer body.Close()
	}
	if err := stream.Err(); err != nil {
		stream.Close()
		return nil, anthropicError(err)
	}
	stream.Close()
	if body == nil {
		return nil, &Error{Kind: protocol.KindServer, Retryable: true, Message: "anthropic: no response body"}
	}
	reqID := ""
	if resp != nil {
		reqID = resp.Header.Get("request-id")
	}
	em.Start(a.name, em.Model, reqID)
	end, err := decodeAnthropic(body, em)
	if err == nil {
		finishBody(body, cancel)
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
func decodeAnthropic(body io.Reader, em *Emitter) (*protocol.EndEvent, error) {
	var (
		blocks []*anthropicBlock
		end    = &protocol.EndEvent{Message: protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Content{}}}
		sse    = newSSEReader(body, em.limit())
	)
	applyDelta := func(b *anthropicBlock, d *anthropicDeltaField) error {
		if err := em.hold(len(d.Text) + len(d.PartialJSON) + len(d.Thinking) + len(d.Signature)); err != nil {
			return err
		}
		switch d.Type {
		case "text_delta":
			b.text.WriteString(d.Text)
			em.Text(d.Text)
		case "input_json_delta":
			b.text.WriteString(d.PartialJSON)
		case "thinking_delta":
			b.text.WriteString(d.Thinking)
			em.Thinking(d.Thinking)
		case "signature_delta":
			b.b.Signature += d.Signature
		}
		return nil
	}
	at := func(i int) (*anthropicBlock, error) {
		if i < 0 || i >= len(blocks) {
			return nil, badStream("anthropic stream: event for unknown content block %d", i)
		}
		return blocks[i], nil
	}
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
			// The hot path: most events are deltas. gjson reads their few
			// fields without encoding/json's per-call allocations.
			f := gjson.GetManyBytes(data, "index", "delta.type", "delta.text", "delta.partial_json", "delta.thinking", "delta.signature")
			b, err := at(int(f[0].Int()))
			if err != nil {
				return nil, err
			}
			if err := applyDelta(b, &anthropicDeltaField{Type: f[1].Str, Text: f[2].Str, PartialJSON: f[3].Str, Thinking: f[4].Str, Signature: f[5].Str}); err != nil {
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
		switch ev.Type {
		case "message_start":
			if ev.Message != nil {
				u := ev.Message.Usage
				end.Usage = protocol.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
					CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
			}
		case "content_block_start":
			cb := ev.ContentBlock
			if cb == nil {
				return nil, badStream("anthropic stream: content_block_start without a content_block")
			}
			if ev.Index != len(blocks) {
				return nil, badStream("anthropic stream: content block %d started out of order", ev.Index)
			}
			if err := em.hold(len(cb.Text) + len(cb.Thinking) + len(cb.Signature) + len(cb.Data) + len(cb.ID) + len(cb.Name)); err != nil {
				return nil, err
			}
			b := &anthropicBlock{}
			switch cb.Type {
			case "text":
				b.b = protocol.Block{Type: protocol.BlockText}
				b.text.WriteString(cb.Text)
				em.Text(cb.Text)
			case "thinking":
				b.b = protocol.Block{Type: protocol.BlockThinking, Signature: cb.Signature}
				b.text.WriteString(cb.Thinking)
				em.Thinking(cb.Thinking)
			case "redacted_thinking":
				b.b = protocol.Block{Type: protocol.BlockRedactedThinking, Data: cb.Data}
			case "tool_use":
				// Without both the call could not be answered: the tool
				// result must name the id, and a caller runs tools by name.
				if cb.ID == "" || cb.Name == "" {
					return nil, badStream("anthropic stream: tool_use block %d without an id or a name", ev.Index)
				}
				b.b = protocol.Block{Type: protocol.BlockToolCall, ID: cb.ID, Name: cb.Name}
			default: // server tool blocks and future types are not ours to replay
				b.b = protocol.Block{Type: cb.Type}
			}
			blocks = append(blocks, b)
		case "content_block_delta":
			b, err := at(ev.Index)
			if err != nil {
				return nil, err
			}
			if ev.Delta != nil {
				if err := applyDelta(b, ev.Delta); err != nil {
					return nil, err
				}
			}
		case "content_block_stop":
			b, err := at(ev.Index)
			if err != nil {
				return nil, err
			}
			if b.b.Type == protocol.BlockToolCall && b.b.Input == nil && b.bad == nil {
				in, err := parseInput(b.text.String())
				if err != nil {
					// An error only if the message does not stop for
					// max_tokens, which cuts the input where it was.
					b.bad = badStream("anthropic stream: tool call %s: %v", b.b.Name, err)
					continue
				}
				b.b.Input = in
				em.ToolCall(protocol.ToolCall{ID: b.b.ID, Name: b.b.Name, Input: in})
			}
		case "message_delta":
			if ev.Delta != nil {
				end.StopReason = ev.Delta.StopReason
			}
			if u := ev.Usage; u != nil {
				end.Usage.OutputTokens = u.OutputTokens
				// Newer streams repeat the cumulative input counts here.
				if u.InputTokens > 0 {
					end.Usage.InputTokens = u.InputTokens
				}
				if u.CacheReadInputTokens > 0 {
					end.Usage.CacheReadTokens = u.CacheReadInputTokens
				}
				if u.CacheCreationInputTokens > 0 {
					end.Usage.CacheWriteTokens = u.CacheCreationInputTokens
				}
			}
		case "message_stop":
			for _, b := range blocks {
				switch b.b.Type {
				case protocol.BlockText:
					b.b.Text = b.text.String()
				case protocol.BlockThinking:
					b.b.Thinking = b.text.String()
				case protocol.BlockToolCall:
					if b.b.Input != nil {
						break
					}
					// max_tokens cut the call while its input was being
					// written: reported, never offered for execution.
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
	}
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

// anthropicError classifies an SDK error. An error event inside a 200
// stream carries status 200 and the error type (e.g. overloaded_error).
func anthropicError(err error) error {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		raw := ae.RawJSON()
		status := ae.StatusCode
		var h http.Header
		if ae.Response != nil {
			h = ae.Response.Header
		}
		inStream := status == http.StatusOK // an error event after HTTP 200
		if inStream {
			status = 0
		}
		e := classifyHTTP(status, string(ae.Type()), raw, h)
		if inStream {
			if e.Kind == protocol.KindBadRequest && ae.Type() != "invalid_request_error" {
				e.Kind, e.Retryable = protocol.KindServer, true
			}
			e.Status = 0
			e.Message = "error event in stream: " + apiMessage(0, raw)
		} else {
			e.Message = apiMessage(status, raw)
		}
		e.Err = err
		return e
	}
	if s := err.Error(); strings.HasPrefix(s, "received error while streaming") {
		e := classifyHTTP(0, "", s, nil)
		if e.Kind == protocol.KindBadRequest {
			e.Kind, e.Retryable = protocol.KindServer, true
		}
		e.Message, e.Err = s, err
		return e
	}
	return err
}
