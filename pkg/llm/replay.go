package llm

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sync"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
)

// ReplayFormat documents the session file that the replay provider plays
// and --record writes. It is printed by `pg-llm --help`.
const ReplayFormat = `A session file is JSON Lines, one recorded call per line:

  {"type":"call","fingerprint":"sha256:...","model":"anthropic/claude-sonnet-4-5",
   "request":{"system":"...","messages":[...],"tools":[...]},
   "events":[{"type":"start",...},{"type":"text","text":"Hi"},{"type":"usage",...},{"type":"end",...}]}

The fingerprint is the SHA-256 of the request's system, messages and tools (model, id, max_tokens, temperature and cache do not count). A request is answered by the first call not yet played whose fingerprint matches; a call with no fingerprint but a request gets the request's fingerprint; a call with neither matches any request, in order (handy for hand-written demos). events may hold only an end event: text and tool_call events are then made from its message. A recorded error event is played back as that error. A request that matches no call fails with kind bad_request and names the first difference from the next unplayed call. Calls are played once each within a process (pg-llm serve); separate pg-llm processes each start from the top.`

// ReplayCall is one line of a session file.
type ReplayCall struct {
	Type        string            `json:"type"` // "call"
	Fingerprint string            `json:"fingerprint,omitempty"`
	Model       string            `json:"model,omitempty"`
	Request     *protocol.Request `json:"request,omitempty"`
	Events      []json.RawMessage `json:"events"`
}

// Fingerprint identifies a request's conversation: its system prompt,
// messages and tools.
func Fingerprint(req *protocol.Request) string {
	b, _ := json.Marshal(struct {
		System   string             `json:"system"`
		Messages []protocol.Message `json:"messages"`
		Tools    []protocol.ToolDef `json:"tools"`
	}{req.System, req.Messages, req.Tools})
	// Over the request as recorded, secrets redacted, so a request that
	// quotes a key matches its recording.
	sum := sha256.Sum256(secrets.Redact(b))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Replay plays a session file.
type Replay struct {
	path  string
	mu    sync.Mutex
	calls []ReplayCall
	fps   []string
	used  []bool
}

// OpenReplay reads a session file.
func OpenReplay(path string) (*Replay, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	r := &Replay{path: path}
	dec := jsonl.NewDecoder(f, path).Strict()
	for {
		var c ReplayCall
		err := dec.Decode(&c)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		if c.Type != "call" {
			return nil, fmt.Errorf("replay: %s:%d: type is %q, want \"call\"", path, dec.Line(), c.Type)
		}
		fp := c.Fingerprint
		if fp == "" && c.Request != nil {
			fp = Fingerprint(c.Request)
		}
		for i, raw := range c.Events {
			v, err := protocol.ModelEvents.Decode(raw)
			if err != nil {
				return nil, fmt.Errorf("replay: %s:%d: events[%d]: %w", path, dec.Line(), i, err)
			}
			if _, ok := v.(*protocol.ModelsEvent); ok {
				return nil, fmt.Errorf("replay: %s:%d: events[%d]: a models event answers a model-list request and is no part of a call", path, dec.Line(), i)
			}
		}
		r.calls = append(r.calls, c)
		r.fps = append(r.fps, fp)
	}
	r.used = make([]bool, len(r.calls))
	return r, nil
}

// next finds the call that answers req and marks it played.
func (r *Replay) next(req *protocol.Request) (*ReplayCall, error) {
	fp := Fingerprint(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	firstUnused := -1
	for i := range r.calls {
		if r.used[i] {
			continue
		}
		if firstUnused < 0 {
			firstUnused = i
		}
		if r.fps[i] == "" || r.fps[i] == fp {
			r.used[i] = true
			return &r.calls[i], nil
		}
	}
	msg := fmt.Sprintf("replay %s: no recorded call matches the request (fingerprint %s; %d calls recorded", r.path, fp, len(r.calls))
	switch {
	case firstUnused < 0:
		msg += ", all already played)"
	case r.calls[firstUnused].Request != nil:
		msg += fmt.Sprintf("); the next unplayed call (call %d) differs at %s", firstUnused+1, firstDiff(r.calls[firstUnused].Request, req))
	default:
		msg += ")"
	}
	return nil, &Error{Kind: protocol.KindBadRequest, Message: msg}
}

// firstDiff names the first field where two requests' conversations differ.
func firstDiff(want, got *protocol.Request) string {
	if want.System != got.System {
		return "system"
	}
	for i := 0; i < len(want.Messages) || i < len(got.Messages); i++ {
		if i >= len(want.Messages) || i >= len(got.Messages) {
			return fmt.Sprintf("messages[%d] (recorded %d messages, got %d)", i, len(want.Messages), len(got.Messages))
		}
		w, g := want.Messages[i], got.Messages[i]
		if w.Role != g.Role {
			return fmt.Sprintf("messages[%d].role", i)
		}
		for j := 0; j < len(w.Content) || j < len(g.Content); j++ {
			if j >= len(w.Content) || j >= len(g.Content) {
				return fmt.Sprintf("messages[%d].content (recorded %d blocks, got %d)", i, len(w.Content), len(g.Content))
			}
			wb, _ := json.Marshal(w.Content[j])
			gb, _ := json.Marshal(g.Content[j])
			if string(wb) != string(gb) {
				return fmt.Sprintf("messages[%d].content[%d]: recorded %.120s, got %.120s", i, j, wb, gb)
			}
		}
	}
	if !reflect.DeepEqual(want.Tools, got.Tools) {
		return "tools"
	}
	return "(nothing visible: the fingerprint was edited)"
}

// Stream plays the matching call.
func (r *Replay) Stream(ctx context.Context, file string, req *protocol.Request, em *Emitter) (*protocol.EndEvent, error) {
	c, err := r.next(req)
	if err != nil {
		return nil, err
	}
	var end *protocol.EndEvent
	started, content := false, false
	for _, raw := range c.Events {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v, _ := protocol.ModelEvents.Decode(raw)
		if err := em.hold(replaySize(v)); err != nil {
			return nil, err
		}
		switch ev := v.(type) {
		case *protocol.StartEvent:
			started = true
			em.Start("replay", cmp.Or(ev.Model, c.Model, "replay/"+file), ev.RequestID)
		case *protocol.TextEvent:
			content = true
			em.Text(ev.Text)
		case *protocol.ThinkingEvent:
			content = true
			em.Thinking(ev.Text)
		case *protocol.ToolCallEvent:
			content = true
			em.ToolCall(ev.Call)
		case *protocol.RetryEvent:
			ev.ID = em.ID
			em.Emit(ev)
		case *protocol.FallbackEvent:
			ev.ID = em.ID
			em.Emit(ev)
		case *protocol.UsageEvent:
			// The router reports usage with the end.
		case *protocol.EndEvent:
			end = ev
		case *protocol.ErrorEvent:
			return nil, &Error{Kind: ev.Kind, Status: ev.Status, Retryable: ev.Retryable, Message: ev.Message, noRetry: true}
		}
	}
	if end == nil {
		return nil, &Error{Kind: protocol.KindNetwork, Message: fmt.Sprintf("replay %s: the recorded call has no end event (a cut-off recording)", r.path), noRetry: true}
	}
	if !started {
		em.Start("replay", cmp.Or(c.Model, end.Model, "replay/"+file), "")
	}
	if !content {
		n := 0
		for _, b := range end.Message.Content {
			n += len(b.Text) + len(b.Thinking) + len(b.Input)
		}
		if err := em.hold(n); err != nil {
			return nil, err
		}
		for _, b := range end.Message.Content {
			switch b.Type {
			case protocol.BlockText:
				em.Text(b.Text)
			case protocol.BlockThinking:
				em.Thinking(b.Thinking)
			case protocol.BlockToolCall:
				em.ToolCall(protocol.ToolCall{ID: b.ID, Name: b.Name, Input: b.Input})
			}
		}
	}
	if end.Message.Role == "" {
		end.Message.Role = protocol.RoleAssistant
	}
	if end.Message.Content == nil {
		end.Message.Content = protocol.Content{}
	}
	return end, nil
}

// replaySize is what a recorded event adds to the answer: the same bound
// holds for a played answer as for a live one.
func replaySize(v any) int {
	switch ev := v.(type) {
	case *protocol.TextEvent:
		return len(ev.Text)
	case *protocol.ThinkingEvent:
		return len(ev.Text)
	case *protocol.ToolCallEvent:
		return len(ev.Call.ID) + len(ev.Call.Name) + len(ev.Call.Input)
	}
	return 0
}

// Recorder appends calls to a session file.
type Recorder struct {
	Path string
}

// Record appends one call: the request and the events it produced. It
// records no transport detail (no header, no key), and the line is
// appended through jsonl, which redacts secrets; consecutive text and
// thinking deltas are joined first, so a key the model streamed in pieces
// is redacted whole.
func (rec *Recorder) Record(req *protocol.Request, events []any) error {
	c := ReplayCall{Type: "call", Fingerprint: Fingerprint(req), Model: req.Model}
	r := protocol.Request{System: req.System, Messages: req.Messages, Tools: req.Tools}
	c.Request = &r
	for _, ev := range joinDeltas(events) {
		b, err := json.Marshal(withoutID(ev))
		if err != nil {
			return err
		}
		c.Events = append(c.Events, b)
	}
	if err := jsonl.Append(rec.Path, c); err != nil {
		return fmt.Errorf("record %s: %w", rec.Path, err)
	}
	return nil
}

// joinDeltas returns events with each run of text deltas, and of thinking
// deltas, joined into one event.
func joinDeltas(events []any) []any {
	out := make([]any, 0, len(events))
	for _, ev := range events {
		switch e := ev.(type) {
		case *protocol.TextEvent:
			if prev, ok := lastOf[*protocol.TextEvent](out); ok {
				j := *prev
				j.Text += e.Text
				out[len(out)-1] = &j
				continue
			}
		case *protocol.ThinkingEvent:
			if prev, ok := lastOf[*protocol.ThinkingEvent](out); ok {
				j := *prev
				j.Text += e.Text
				out[len(out)-1] = &j
				continue
			}
		}
		out = append(out, ev)
	}
	return out
}

func lastOf[T any](events []any) (T, bool) {
	var zero T
	if len(events) == 0 {
		return zero, false
	}
	t, ok := events[len(events)-1].(T)
	return t, ok
}

// withoutID returns a copy of a model event without the id pg-llm serve
// gave it, nor the name of the conversation serve holds (an end event's
// held): a recording holds the model's answer, not the request it
// answered. Every model event (protocol.ModelEvents) is a pointer to a
// struct with a string field ID; anything else comes back as it is.
func withoutID(ev any) any {
	v := reflect.ValueOf(ev)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return ev
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	for _, f := range [...]string{"ID", "Held"} {
		if id := c.Elem().FieldByName(f); id.Kind() == reflect.String {
			id.SetString("")
		}
	}
	return c.Interface()
}
