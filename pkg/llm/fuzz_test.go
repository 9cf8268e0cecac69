package llm

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

func anthropicStreamOf(body []byte) io.Reader { return bytes.NewReader(body) }

func openaiStreamOf(body []byte) io.Reader { return bytes.NewReader(body) }

func seedBodies(f *testing.F, family string) [][]byte {
	paths, _ := filepath.Glob(filepath.Join(fixtureDir, family, "*.http"))
	var out [][]byte
	for _, p := range paths {
		rs := fixtures(f, family, stripExt(filepath.Base(p)))
		out = append(out, rs[0].Body)
	}
	return out
}

func stripExt(s string) string { return s[:len(s)-len(filepath.Ext(s))] }

// checkDecoded holds for any input: a decoded end is a well-formed
// assistant message whose tool calls carry JSON objects, and content events
// only went out that the message holds.
func checkDecoded(t *testing.T, end *protocol.EndEvent, err error, events []any) {
	if err != nil {
		if end != nil {
			t.Fatal("both an end and an error")
		}
		return
	}
	req := protocol.Request{Messages: []protocol.Message{end.Message}}
	if verr := req.Validate(); verr != nil {
		t.Fatalf("decoded message invalid: %v", verr)
	}
	calls := 0
	for _, b := range end.Message.Content {
		if b.Type == protocol.BlockToolCall {
			calls++
			var m map[string]any
			if json.Unmarshal(b.Input, &m) != nil {
				t.Fatalf("tool input not an object: %s", b.Input)
			}
		}
	}
	emitted := 0
	for _, ev := range events {
		if _, ok := ev.(*protocol.ToolCallEvent); ok {
			emitted++
		}
	}
	if emitted != calls {
		t.Fatalf("%d tool_call events, %d tool calls in the message", emitted, calls)
	}
}

func FuzzAnthropicStream(f *testing.F) {
	for _, b := range seedBodies(f, "anthropic") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var events []any
		em := NewEmitter("", func(ev any) { events = append(events, ev) })
		end, err := decodeAnthropic(anthropicStreamOf(body), em)
		checkDecoded(t, end, err, events)
	})
}

func FuzzOpenAIStream(f *testing.F) {
	for _, b := range seedBodies(f, "openai") {
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, body []byte, lenient bool) {
		var events []any
		em := NewEmitter("", func(ev any) { events = append(events, ev) })
		end, err := decodeOpenAI(openaiStreamOf(body), em, lenient)
		checkDecoded(t, end, err, events)
	})
}

func FuzzReplayFile(f *testing.F) {
	f.Add([]byte(`{"type":"call","events":[{"type":"end","stop_reason":"end_turn","message":{"role":"assistant","content":"hi"}}]}` + "\n"))
	f.Add([]byte(`{"type":"call","fingerprint":"sha256:00","events":[{"type":"error","kind":"overloaded","message":"x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := OpenReplay(file)
		if err != nil {
			return
		}
		em := NewEmitter("x", func(any) {})
		req := &protocol.Request{Messages: []protocol.Message{{Role: "user", Content: protocol.Content{{Type: "text", Text: "hi"}}}}}
		end, err := r.Stream(t.Context(), "", req, em)
		if err == nil && end == nil {
			t.Fatal("no end and no error")
		}
	})
}

func FuzzAPIMessage(f *testing.F) {
	f.Add(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	f.Add(`{"error":"model not found"}`)
	f.Add(`{"error":{"message":"a \"quoted\" \u00e9"}}`)
	f.Fuzz(func(t *testing.T, body string) {
		_ = apiMessage(500, body)
		_ = classifyHTTP(400, "", body, nil)
	})
}
