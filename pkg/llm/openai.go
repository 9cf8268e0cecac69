package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/tidwall/gjson"
)

// OpenAI calls Chat Completions, streaming; with compatible set it speaks
// to OpenAI-compatible servers (Ollama, vLLM, llama.cpp server,
// OpenRouter), which take max_tokens rather than max_completion_tokens and
// may stream reasoning_content.
type OpenAI struct {
	name       string
	compatible bool
	url        string
	header     http.Header
	hc         *http.Client
	cache      *encodingCache
}

// NewOpenAI returns the provider; base may be empty (api.openai.com). With
// no key, no authorization header is sent (local servers).
func NewOpenAI(name, key, base string, compatible bool, hc *http.Client) *OpenAI {
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	return &OpenAI{name: name, compatible: compatible, url: strings.TrimSuffix(base, "/") + "/chat/completions", header: h, hc: hc, cache: newEncodingCache()}
}

// The messages and tools of Chat Completions a request sends.
type (
	openaiTextMessage struct {
		Content string `json:"content"`
		Role    string `json:"role"`
	}
	openaiToolMessage struct {
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		Role       string `json:"role"`
	}
	openaiAssistantMessage struct {
		Content   *string               `json:"content,omitempty"`
		ToolCalls []openaiToolCallParam `json:"tool_calls,omitempty"`
		Role      string                `json:"role"`
	}
	openaiToolCallParam struct {
		ID       string             `json:"id"`
		Function openaiFunctionCall `json:"function"`
		Type     string             `json:"type"`
	}
	openaiFunctionCall struct {
		Arguments string `json:"arguments"`
		Name      string `json:"name"`
	}
	openaiToolParam struct {
		Function openaiFunctionDef `json:"function"`
		Type     string            `json:"type"`
	}
	openaiFunctionDef struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	openaiNamedChoice struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
		Type string `json:"type"`
	}
	// openaiRest is everything of a request but its model and messages.
	// openaiRest is what follows the messages, the max tokens and the
	// tools (which are written from their cached encoding: through the
	// encoder, a json.RawMessage is scanned again every call).
	openaiRest struct {
		ToolChoice    any      `json:"tool_choice,omitempty"`
		Temperature   *float64 `json:"temperature,omitempty"`
		Stop          []string `json:"stop,omitempty"`
		Stream        bool     `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
)

// openaiMessage encodes one message as Chat Completions messages,
// comma-separated: a tool result is a message of its own (role tool);
// text and tool calls make one user or assistant message after them.
// Thinking is not sent back.
func openaiMessage(m *protocol.Message) (wireMessage, error) {
	var (
		out   []byte
		text  strings.Builder
		calls []openaiToolCallParam
		err   error
	)
	add := func(v any) {
		if err != nil {
			return
		}
		if len(out) > 0 {
			out = append(out, ',')
		}
		out, err = appendJSON(out, v)
	}
	for _, b := range m.Content {
		switch b.Type {
		case protocol.BlockText:
			text.WriteString(b.Text)
		case protocol.BlockToolCall:
			in := string(b.Input)
			if in == "" {
				in = "{}"
			}
			calls = append(calls, openaiToolCallParam{ID: b.ID, Function: openaiFunctionCall{Arguments: in, Name: b.Name}, Type: "function"})
		case protocol.BlockToolResult:
			out := b.Output
			if b.IsError {
				out = "Error: " + out
			}
			add(openaiToolMessage{Content: out, ToolCallID: b.ID, Role: "tool"})
		}
	}
	switch m.Role {
	case protocol.RoleAssistant:
		if text.Len() == 0 && len(calls) == 0 {
			break
		}
		a := openaiAssistantMessage{ToolCalls: calls, Role: "assistant"}
		if text.Len() > 0 {
			s := text.String()
			a.Content = &s
		}
		add(a)
	default:
		if text.Len() > 0 {
			add(openaiTextMessage{Content: text.String(), Role: "user"})
		}
	}
	return wireMessage{b: out}, err
}

func openaiTools(defs []protocol.ToolDef) ([]byte, error) {
	tools := make([]openaiToolParam, len(defs))
	for i, t := range defs {
		params := t.InputSchema
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if p := bytes.TrimSpace(params); len(p) == 0 || p[0] != '{' || !json.Valid(p) {
			return nil, protocol.FieldError{Field: fmt.Sprintf("tools[%d].input_schema", i), Msg: "is not a JSON object"}
		}
		tools[i] = openaiToolParam{Function: openaiFunctionDef{Name: t.Name, Description: t.Description, Parameters: params}, Type: "function"}
	}
	return appendJSON(nil, tools)
}

// body builds the Chat Completions request body.
func (o *OpenAI) body(model string, req *protocol.Request) ([]byte, error) {
	wire, err := o.cache.messages(req.Messages, openaiMessage)
	if err != nil {
		return nil, err
	}
	rest := openaiRest{Stream: true, Temperature: req.Temperature, Stop: req.Stop}
	rest.StreamOptions.IncludeUsage = true
	var system, tools []byte
	if req.System != "" {
		if system, err = o.cache.systemPrompt(req.System, false, openaiSystem); err != nil {
			return nil, err
		}
	}
	if len(req.Tools) > 0 {
		if tools, err = o.cache.toolDefs(req.Tools, openaiTools); err != nil {
			return nil, err
		}
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none":
		rest.ToolChoice = req.ToolChoice
	case "any":
		rest.ToolChoice = "required"
	default:
		var c openaiNamedChoice
		c.Function.Name, c.Type = req.ToolChoice, "function"
		rest.ToolChoice = c
	}
	size := len(system) + 256
	for _, w := range wire {
		size += len(w.b) + 1
	}
	body := make([]byte, 0, size+len(tools))
	body = append(body, `{"model":`...)
	if body, err = appendJSON(body, model); err != nil {
		return nil, err
	}
	body = append(body, `,"messages":[`...)
	first := true
	if system != nil {
		body = append(body, system...)
		first = false
	}
	for _, w := range wire {
		if len(w.b) == 0 {
			continue
		}
		if !first {
			body = append(body, ',')
		}
		body = append(body, w.b...)
		first = false
	}
	body = append(body, "],"...)
	// OpenAI's own API takes max_completion_tokens; compatible servers
	// know max_tokens.
	switch {
	case req.MaxTokens == 0:
	case o.compatible:
		body = append(strconv.AppendInt(append(body, `"max_tokens":`...), int64(req.MaxTokens), 10), ',')
	default:
		body = append(strconv.AppendInt(append(body, `"max_completion_tokens":`...), int64(req.MaxTokens), 10), ',')
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

// openaiSystem encodes the system prompt as the first message.
func openaiSystem(text string, _ bool) ([]byte, error) {
	return appendJSON(nil, openaiTextMessage{Content: text, Role: "system"})
}

// Stream runs one attempt.
func (o *OpenAI) Stream(ctx context.Context, model string, req *protocol.Request, em *Emitter) (*protocol.EndEvent, error) {
	body, err := o.body(model, req)
	if err != nil {
		return nil, &Error{Kind: protocol.KindBadRequest, Message: err.Error(), Err: err}
	}
	ctx, cancel := context.WithCancel(ctx) // finishBody's way to give up on a stalled body
	defer cancel()
	resp, err := post(ctx, o.hc, o.url, o.header, body, openaiHTTPError)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	em.Start(o.name, em.Model, resp.Header.Get("x-request-id"))
	end, err := decodeOpenAI(resp.Body, em, o.compatible)
	if err == nil {
		finishBody(resp.Body, cancel)
	}
	return end, err
}

// openaiChunk holds the fields of a chat.completion.chunk that matter here,
// with the reasoning fields of compatible servers (reasoning_content from
// llama.cpp, vLLM and DeepSeek; reasoning from OpenRouter and Ollama).
type openaiChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
			ToolCalls        []struct {
				Index    *int   `json:"index"` // nil: the server left it out
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// finishReasons maps Chat Completions finish reasons to the stop reasons
// of the event protocol.
var finishReasons = map[string]string{
	"stop":           "end_turn",
	"tool_calls":     "tool_use",
	"function_call":  "tool_use",
	"length":         protocol.StopMaxTokens,
	"content_filter": "refusal",
}

// openaiCall is a tool call being assembled from fragments.
type openaiCall struct {
	key      int // the fragments' index, or past all indexes for calls without one
	id, name string
	args     strings.Builder
}

// openaiCalls assembles tool calls from delta fragments. OpenAI keys the
// fragments of parallel calls by index and sends id and name once, in the
// first fragment. Some compatible servers differ: Gemini's endpoint leaves
// out index and sends each call whole with its id; others repeat the name
// in every fragment. So a fragment without an index belongs to the call
// with its id, or, with no id either, continues the last call; and the
// first name a call gets is kept (names are never split across fragments).
type openaiCalls struct {
	byIndex map[int]*openaiCall
	byID    map[string]*openaiCall
	order   []*openaiCall
}

func (cs *openaiCalls) add(index *int, id, name, args string) {
	var c *openaiCall
	switch {
	case index != nil:
		c = cs.byIndex[*index]
		if c == nil {
			c = &openaiCall{key: *index}
			if cs.byIndex == nil {
				cs.byIndex = map[int]*openaiCall{}
			}
			cs.byIndex[*index] = c
			cs.order = append(cs.order, c)
		}
	case id != "" && cs.byID[id] != nil:
		c = cs.byID[id]
	case id == "" && len(cs.order) > 0:
		c = cs.order[len(cs.order)-1]
	default:
		c = &openaiCall{key: 1<<30 + len(cs.order)}
		cs.order = append(cs.order, c)
	}
	if c.id == "" && id != "" {
		c.id = id
		if cs.byID == nil {
			cs.byID = map[string]*openaiCall{}
		}
		cs.byID[id] = c
	}
	if c.name == "" {
		c.name = name
	}
	c.args.WriteString(args)
}

// decodeOpenAI reads a Chat Completions event stream. Text and reasoning
// deltas go out at once; tool calls arrive as fragments (several in
// parallel, interleaved) and go out complete, in index order, when the
// stream ends. An error object inside the stream is a failure even after
// HTTP 200.
//
// The stream must finish its choice and then say [DONE]; anything shorter
// was cut off, and a cut after the finish_reason chunk would lose the usage
// chunk that follows it (usage 0, cost 0). OpenAI always sends [DONE], and
// so do Ollama, llama.cpp server, vLLM and OpenRouter; with lenient set (the
// openai-compatible provider) a stream that ends without [DONE] still
// counts as complete once both the finish_reason and the usage have
// arrived, because then nothing was lost, for servers or proxies that
// close the stream early.
func decodeOpenAI(body io.Reader, em *Emitter, lenient bool) (_ *protocol.EndEvent, err error) {
	var (
		text     strings.Builder
		thinking strings.Builder
		calls    openaiCalls
		finish   string
		gotUsage bool
		end      = &protocol.EndEvent{Message: protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Content{}}}
		sse      = newSSEReader(body, em.limit(), em.wait)
	)
	defer func() {
		if err != nil { // a usage chunk that came before the break is charged all the same
			em.brokenUsage(end.Usage)
		}
	}()
	for {
		_, data, err := sse.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if lenient && finish != "" && gotUsage {
					break
				}
				if finish != "" {
					err = fmt.Errorf("stream ended after the finish_reason but before [DONE]: %w", ErrTruncated)
				} else {
					err = ErrTruncated
				}
			}
			return nil, err
		}
		if bytes.HasPrefix(data, []byte("[DONE]")) {
			if finish == "" {
				return nil, fmt.Errorf("openai stream: [DONE] before a finish_reason: %w", ErrTruncated)
			}
			break
		}
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		var ch openaiChunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return nil, badStream("openai stream: %v", err)
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" {
			e := streamError("openai", "", string(data))
			if e.Kind == protocol.KindServer && strings.Contains(string(ch.Error), "overloaded") {
				e.Kind = protocol.KindOverloaded
			}
			if e.Kind == protocol.KindServer && strings.Contains(string(ch.Error), "rate_limit") {
				e.Kind = protocol.KindRateLimit
			}
			return nil, e
		}
		if u := ch.Usage; u != nil && (u.PromptTokens < 0 || u.CompletionTokens < 0 || u.PromptTokensDetails.CachedTokens < 0) {
			return nil, badUsage(fmt.Errorf("prompt_tokens %d, completion_tokens %d, cached_tokens %d", u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens))
		}
		if u := ch.Usage; u != nil && u.PromptTokens+u.CompletionTokens > 0 {
			cached := min(u.PromptTokensDetails.CachedTokens, u.PromptTokens) // prompt_tokens includes the cached ones
			end.Usage = protocol.Usage{InputTokens: u.PromptTokens - cached, OutputTokens: u.CompletionTokens, CacheReadTokens: cached}
			gotUsage = true
		}
		for i := range ch.Choices {
			c := &ch.Choices[i]
			if c.Index != 0 {
				continue
			}
			d := &c.Delta
			n := len(d.ReasoningContent) + len(d.Reasoning) + len(d.Content)
			for _, tc := range d.ToolCalls {
				n += len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments)
			}
			if err := em.hold(n); err != nil {
				return nil, err
			}
			if r := d.ReasoningContent + d.Reasoning; r != "" {
				thinking.WriteString(r)
				em.Thinking(r)
			}
			if d.Content != "" {
				text.WriteString(d.Content)
				em.Text(d.Content)
			}
			for _, tc := range d.ToolCalls {
				calls.add(tc.Index, tc.ID, tc.Function.Name, tc.Function.Arguments)
			}
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if thinking.Len() > 0 {
		end.Message.Content = append(end.Message.Content, protocol.Block{Type: protocol.BlockThinking, Thinking: thinking.String()})
	}
	if text.Len() > 0 {
		end.Message.Content = append(end.Message.Content, protocol.Block{Type: protocol.BlockText, Text: text.String()})
	}
	order := calls.order
	sort.SliceStable(order, func(i, j int) bool { return order[i].key < order[j].key })
	seen := map[string]bool{}
	for n, cl := range order {
		if cl.name == "" {
			return nil, badStream("openai stream: tool call %d has no name", n)
		}
		in, err := parseInput(cl.args.String())
		if err != nil && finish == "length" {
			// max_tokens cut the call's arguments: reported, never
			// offered for execution.
			end.Incomplete = append(end.Incomplete, protocol.IncompleteToolCall{ID: cl.id, Name: cl.name, PartialInput: cl.args.String()})
			continue
		}
		if err != nil {
			return nil, badStream("openai stream: tool call %s: %v", cl.name, err)
		}
		if cl.id == "" || seen[cl.id] {
			cl.id = fmt.Sprintf("call_%d", n)
		}
		seen[cl.id] = true
		tc := protocol.ToolCall{ID: cl.id, Name: cl.name, Input: in}
		em.ToolCall(tc)
		end.Message.Content = append(end.Message.Content, protocol.Block{Type: protocol.BlockToolCall, ID: tc.ID, Name: tc.Name, Input: in})
	}
	end.StopReason = finish
	if r, ok := finishReasons[finish]; ok {
		end.StopReason = r
	}
	if len(order) > len(end.Incomplete) && end.StopReason == "end_turn" {
		end.StopReason = "tool_use" // some compatible servers say stop
	}
	return end, nil
}

// openaiHTTPError classifies an error response: OpenAI's
// {"error":{"message","type","code"}}, and the bodies of compatible
// servers ({"error":"..."} from Ollama).
func openaiHTTPError(status int, body []byte, h http.Header) *Error {
	f := gjson.GetManyBytes(body, "error.type", "error.code", "error.message")
	typ := f[0].String()
	if c := f[1].String(); c != "" {
		typ += " " + c
	}
	e := classifyHTTP(status, typ, string(body)+" "+f[2].String(), h)
	e.Message = apiMessage(status, string(body))
	return e
}
