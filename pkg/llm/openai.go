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
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// OpenAI calls Chat Completions through the official SDK, streaming; with
// compatible set it speaks to OpenAI-compatible servers (Ollama, vLLM,
// llama.cpp server, OpenRouter), which take max_tokens rather than
// max_completion_tokens and may stream reasoning_content.
type OpenAI struct {
	name       string
	compatible bool
	chat       openai.ChatCompletionService
}

// NewOpenAI returns the provider. It builds the chat completion service
// alone, not openai.NewClient: the client reaches every API of the SDK,
// which keeps them all in the binary, and reads OPENAI_* from the process
// environment behind the configuration's back.
func NewOpenAI(name, key, base string, compatible bool, hc *http.Client) *OpenAI {
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	opts := []option.RequestOption{
		option.WithAPIKey(key),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
		option.WithHTTPClient(hc),
	}
	if key == "" {
		opts = append(opts, option.WithHeaderDel("authorization"))
	}
	return &OpenAI{name: name, compatible: compatible, chat: openai.NewChatCompletionService(opts...)}
}

func openaiParams(model string, req *protocol.Request, compatible bool) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	if compatible {
		p.MaxTokens = openai.Int(int64(req.MaxTokens))
	} else {
		p.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
	}
	p.StreamOptions.IncludeUsage = openai.Bool(true)
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		var text strings.Builder
		var calls []openai.ChatCompletionMessageToolCallUnionParam
		for _, b := range m.Content {
			switch b.Type {
			case protocol.BlockText:
				text.WriteString(b.Text)
			case protocol.BlockToolCall:
				in := string(b.Input)
				if in == "" {
					in = "{}"
				}
				calls = append(calls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: b.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: in}}})
			case protocol.BlockToolResult:
				out := b.Output
				if b.IsError {
					out = "Error: " + out
				}
				p.Messages = append(p.Messages, openai.ToolMessage(out, b.ID))
			}
		}
		switch m.Role {
		case protocol.RoleAssistant:
			if text.Len() == 0 && len(calls) == 0 {
				continue
			}
			a := openai.ChatCompletionAssistantMessageParam{ToolCalls: calls}
			if text.Len() > 0 {
				a.Content.OfString = openai.String(text.String())
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		default:
			if text.Len() > 0 {
				p.Messages = append(p.Messages, openai.UserMessage(text.String()))
			}
		}
	}
	for i, t := range req.Tools {
		var params map[string]any
		if len(t.InputSchema) > 0 {
			if err := json.Unmarshal(t.InputSchema, &params); err != nil {
				return p, protocol.FieldError{Field: fmt.Sprintf("tools[%d].input_schema", i), Msg: "is not a JSON object"}
			}
		} else {
			params = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(params)}
		if t.Description != "" {
			fd.Description = openai.String(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	if req.Temperature != nil {
		p.Temperature = openai.Float(*req.Temperature)
	}
	if len(req.Stop) > 0 {
		p.Stop.OfStringArray = req.Stop
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none":
		p.ToolChoice.OfAuto = openai.String(req.ToolChoice)
	case "any":
		p.ToolChoice.OfAuto = openai.String("required")
	default:
		p.ToolChoice.OfFunctionToolChoice = &openai.ChatCompletionNamedToolChoiceParam{
			Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: req.ToolChoice}}
	}
	return p, nil
}

// Stream runs one attempt.
func (o *OpenAI) Stream(ctx context.Context, model string, req *protocol.Request, em *Emitter) (*protocol.EndEvent, error) {
	params, err := openaiParams(model, req, o.compatible)
	if err != nil {
		return nil, &Error{Kind: protocol.KindBadRequest, Message: err.Error(), Err: err}
	}
	var resp *http.Response
	tap := &bodyTap{}
	ctx, cancel := context.WithCancel(ctx) // finishBody's way to give up on a stalled body
	defer cancel()
	stream := o.chat.NewStreaming(ctx, params, option.WithResponseInto(&resp), option.WithMiddleware(tap.middleware))
	body := tap.take()
	if body != nil {
		defer body.Close()
	}
	if err := stream.Err(); err != nil {
		stream.Close()
		return nil, openaiError(err)
	}
	stream.Close()
	if body == nil {
		return nil, &Error{Kind: protocol.KindServer, Retryable: true, Message: o.name + ": no response body"}
	}
	reqID := ""
	if resp != nil {
		reqID = resp.Header.Get("x-request-id")
	}
	em.Start(o.name, em.Model, reqID)
	end, err := decodeOpenAI(body, em, o.compatible)
	if err == nil {
		finishBody(body, cancel)
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
func decodeOpenAI(body io.Reader, em *Emitter, lenient bool) (*protocol.EndEvent, error) {
	var (
		text     strings.Builder
		thinking strings.Builder
		calls    openaiCalls
		finish   string
		gotUsage bool
		end      = &protocol.EndEvent{Message: protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Content{}}}
		sse      = newSSEReader(body, em.limit())
	)
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

// openaiError classifies an SDK error, including error objects sent
// inside a 200 stream and the bodies of compatible servers ({"error":"..."}).
func openaiError(err error) error {
	var oe *openai.Error
	if errors.As(err, &oe) {
		raw := oe.RawJSON()
		var h http.Header
		if oe.Response != nil {
			h = oe.Response.Header
		}
		typ := oe.Type
		if oe.Code != "" {
			typ += " " + oe.Code
		}
		e := classifyHTTP(oe.StatusCode, typ, raw+" "+oe.Message, h)
		e.Message = apiMessage(oe.StatusCode, raw)
		e.Err = err
		return e
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		data := string(se.Event.Data)
		e := classifyHTTP(0, "", data, nil)
		switch {
		case e.Kind != protocol.KindBadRequest:
		case strings.Contains(data, "overloaded") || strings.Contains(data, "503"):
			e.Kind, e.Retryable = protocol.KindOverloaded, true
		case strings.Contains(data, "rate_limit") || strings.Contains(data, "429"):
			e.Kind, e.Retryable = protocol.KindRateLimit, true
		default:
			e.Kind, e.Retryable = protocol.KindServer, true
		}
		e.Message = "error event in stream: " + apiMessage(0, data)
		e.Err = err
		return e
	}
	return err
}
