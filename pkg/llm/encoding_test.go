package llm

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// growing is an agent's conversation after n steps: a prompt, then a tool
// call and its result per step, with thinking on some answers.
func growing(n int) []protocol.Message {
	msgs := []protocol.Message{{Role: "user", Content: protocol.Content{{Type: "text", Text: "fix <the> \"bug\" & go"}}}}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("toolu_%d", i)
		a := protocol.Message{Role: "assistant", Content: protocol.Content{
			{Type: "text", Text: fmt.Sprintf("step %d", i)},
			{Type: "tool_call", ID: id, Name: "bash", Input: json.RawMessage(fmt.Sprintf(`{"command": "echo %d"}`, i))}}}
		if i%3 == 1 {
			a.Content = append(protocol.Content{{Type: "thinking", Thinking: "hmm", Signature: "sig"}}, a.Content...)
		}
		msgs = append(msgs, a, protocol.Message{Role: "tool", Content: protocol.Content{{Type: "tool_result", ID: id, Output: fmt.Sprintf("%d\n", i), IsError: i%4 == 0}}})
		if i%5 == 2 {
			msgs = append(msgs, protocol.Message{Role: "user", Content: protocol.Content{{Type: "text", Text: "keep going"}}})
		}
	}
	return msgs
}

// TestEncodingCacheSameBody: a provider that encoded the earlier calls of
// a conversation builds each request byte for byte as a fresh one does,
// cache breakpoints and all, including after a message changed in place.
func TestEncodingCacheSameBody(t *testing.T) {
	tools := []protocol.ToolDef{{Name: "bash", Description: "run", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	for _, system := range []string{"", "be brief"} {
		warmA := NewAnthropic("anthropic", "k", "", nil)
		warmO := NewOpenAI("openai", "k", "", false, nil)
		for n := 0; n < 30; n++ {
			req := &protocol.Request{System: system, Cache: true, MaxTokens: 100, Tools: tools, Messages: growing(n)}
			if n == 20 {
				req.Messages[3].Content[0].Output = "changed in place"
				req.Tools[0].InputSchema[2] = 'T' // {"Type":"object"}
			}
			for _, c := range []struct {
				name        string
				warm, fresh func() ([]byte, error)
			}{
				{"anthropic", func() ([]byte, error) { return warmA.body("m", req) }, func() ([]byte, error) { return NewAnthropic("anthropic", "k", "", nil).body("m", req) }},
				{"openai", func() ([]byte, error) { return warmO.body("m", req) }, func() ([]byte, error) { return NewOpenAI("openai", "k", "", false, nil).body("m", req) }},
			} {
				got, err := c.warm()
				if err != nil {
					t.Fatal(err)
				}
				want, err := c.fresh()
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want) {
					t.Fatalf("%s, %d steps, system %q: cached body\n%s\nfresh body\n%s", c.name, n, system, got, want)
				}
				if !json.Valid(got) {
					t.Fatalf("%s: not JSON: %s", c.name, got)
				}
			}
			req.Tools[0].InputSchema = json.RawMessage(`{"type":"object"}`)
		}
	}
}

// TestEncodingCacheEncodesWhatIsNew: a call that adds two messages to a
// conversation already sent encodes those two.
func TestEncodingCacheEncodesWhatIsNew(t *testing.T) {
	c := newEncodingCache()
	n := 0
	count := func(m *protocol.Message) (wireMessage, error) { n++; return anthropicMessage(m) }
	msgs := growing(50)
	if _, err := c.messages(msgs[:len(msgs)-2], count); err != nil {
		t.Fatal(err)
	}
	n = 0
	if _, err := c.messages(msgs, count); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d messages encoded for 2 new ones", n)
	}
}
