package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
)

// A Script is a fake model that works tasks by the book: each task names a
// string its first user message contains, and the turns the model answers
// with, in order. The Scripted server picks the task from the request and
// the turn from the number of assistant messages already in it, so any
// number of workers can share one server and take the tasks in any order.
type Script struct {
	Tasks []ScriptTask `json:"tasks"`
}

// ScriptTask is the conversation of one task.
type ScriptTask struct {
	Match string       `json:"match"`
	Turns []ScriptTurn `json:"turns"`
}

// ScriptTurn is one assistant turn: optional text, then tool calls. A turn
// with no calls ends the task.
type ScriptTurn struct {
	Text  string       `json:"text,omitempty"`
	Calls []ScriptCall `json:"calls,omitempty"`
}

// ScriptCall is one tool call of a turn.
type ScriptCall struct {
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// LoadScript reads a script file strictly: unknown fields are errors.
func LoadScript(path string) (*Script, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("script %s: %w", path, err)
	}
	for i, t := range s.Tasks {
		if t.Match == "" || len(t.Turns) == 0 {
			return nil, fmt.Errorf("script %s: tasks[%d] needs match and turns", path, i)
		}
		for j, turn := range t.Turns {
			for k, c := range turn.Calls {
				var obj map[string]any
				if c.Name == "" || json.Unmarshal(c.Input, &obj) != nil || obj == nil {
					return nil, fmt.Errorf("script %s: tasks[%d].turns[%d].calls[%d] needs a name and a JSON object input", path, i, j, k)
				}
			}
		}
	}
	return &s, nil
}

// scriptedRequest is the part of an Anthropic Messages request the script
// looks at.
type scriptedRequest struct {
	Model    string        `json:"model"`
	Messages []wireMessage `json:"messages"`
}

// wireMessage is one message of a request as the script checks it.
type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// checkTurns refuses, as the Messages API does, a conversation that does
// not start with the user, has two turns of one role in a row, or leaves
// a tool_use without its tool_result in the next (user) turn or a
// tool_result without its tool_use in the turn before. It also refuses a
// conversation that ends with the model's turn (a prefill: refused by the
// API with extended thinking on, and never what an agent loop means).
func checkTurns(msgs []wireMessage) error {
	var open []string // tool_use ids of the assistant turn before
	for i, m := range msgs {
		var blocks []struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			ToolUseID string `json:"tool_use_id"`
		}
		if len(m.Content) > 0 && m.Content[0] == '[' {
			if err := json.Unmarshal(m.Content, &blocks); err != nil {
				return fmt.Errorf("messages.%d.content: %v", i, err)
			}
		}
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			return fmt.Errorf("messages.%d: roles must alternate, starting with user: got %q, want %q", i, m.Role, want)
		}
		answered := map[string]bool{}
		var uses []string
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				uses = append(uses, b.ID)
			case "tool_result":
				if !slices.Contains(open, b.ToolUseID) {
					return fmt.Errorf("messages.%d: unexpected tool_use_id found in tool_result blocks: %s; each tool_result block must have a corresponding tool_use block in the previous message", i, b.ToolUseID)
				}
				answered[b.ToolUseID] = true
			}
		}
		for _, id := range open {
			if !answered[id] {
				return fmt.Errorf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %s; each tool_use block must have a corresponding tool_result block in the next message", i-1, id)
			}
		}
		open = uses
	}
	if len(open) > 0 {
		return fmt.Errorf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %s", len(msgs)-1, strings.Join(open, ", "))
	}
	if len(msgs)%2 == 0 {
		return fmt.Errorf("messages.%d: the conversation ends with an assistant turn (a prefill), which this model refuses", len(msgs)-1)
	}
	return nil
}

// ServeHTTP answers POST /v1/messages with the Anthropic streaming wire
// format (message_start, content blocks with text and input_json deltas,
// message_delta with the stop reason and usage, message_stop). A request
// whose turns the API would refuse (see checkTurns), that no task matches,
// or that has run past its task's turns, gets a 400 error document naming
// why.
func (s *Script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/messages") {
		anthropicError(w, http.StatusNotFound, "not_found_error", "the scripted model serves POST /v1/messages")
		return
	}
	var req scriptedRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "messages: a request needs at least one message")
		return
	}
	if err := checkTurns(req.Messages); err != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	first := string(req.Messages[0].Content)
	turn := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			turn++
		}
	}
	var task *ScriptTask
	for i := range s.Tasks {
		if strings.Contains(first, s.Tasks[i].Match) {
			task = &s.Tasks[i]
			break
		}
	}
	switch {
	case task == nil:
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "the script has no task matching the first message")
		return
	case turn >= len(task.Turns):
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("task %q has %d turns; the request asks for turn %d", task.Match, len(task.Turns), turn+1))
		return
	}
	writeTurn(w, req.Model, task, turn, len(body))
}

func anthropicError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": msg}})
	w.Write(b)
}

// writeTurn streams one turn. Token counts are made up but stable: about a
// quarter of the bytes in and out, so budgets and costs look real.
func writeTurn(w http.ResponseWriter, model string, task *ScriptTask, turn, reqBytes int) {
	t := task.Turns[turn]
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	event := func(name string, v map[string]any) {
		v["type"] = name
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	id := fmt.Sprintf("msg_%s_%d", slug(task.Match), turn+1)
	event("message_start", map[string]any{"message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": reqBytes / 4, "output_tokens": 1},
	}})
	out, index := 0, 0
	if t.Text != "" {
		event("content_block_start", map[string]any{"index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, part := range chunks(t.Text, 24) {
			event("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "text_delta", "text": part}})
		}
		event("content_block_stop", map[string]any{"index": index})
		out += len(t.Text)
		index++
	}
	for k, c := range t.Calls {
		callID := fmt.Sprintf("toolu_%s_%d_%d", slug(task.Match), turn+1, k+1)
		event("content_block_start", map[string]any{"index": index, "content_block": map[string]any{"type": "tool_use", "id": callID, "name": c.Name, "input": map[string]any{}}})
		input := new(bytes.Buffer)
		json.Compact(input, c.Input) // LoadScript checked it is an object
		for _, part := range chunks(input.String(), 32) {
			event("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		event("content_block_stop", map[string]any{"index": index})
		out += input.Len()
		index++
	}
	stop := "end_turn"
	if len(t.Calls) > 0 {
		stop = "tool_use"
	}
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": out/4 + 1}})
	event("message_stop", map[string]any{})
}

// chunks splits s into pieces of at most n bytes, never inside a UTF-8
// sequence, as a model streams its output.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		if cut == 0 {
			cut = n
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}

func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}
