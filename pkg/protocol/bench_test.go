package protocol_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// BenchmarkDecodeRequest reads the request of the 201st step of a loop:
// a task and 200 tool calls with their results, as pg-llm serve gets it.
func BenchmarkDecodeRequest(b *testing.B) {
	req := protocol.Request{ID: "r", Model: "replay/x", MaxTokens: 1000, System: "You are a coding agent."}
	req.Messages = append(req.Messages, protocol.Message{Role: "user", Content: protocol.Content{{Type: "text", Text: "The task: benchmark"}}})
	for i := range 200 {
		id := fmt.Sprint("c", i)
		req.Messages = append(req.Messages,
			protocol.Message{Role: "assistant", Content: protocol.Content{{Type: "tool_call", ID: id, Name: "read", Input: json.RawMessage(`{"path":"f.txt"}`)}}},
			protocol.Message{Role: "tool", Content: protocol.Content{{Type: "tool_result", ID: id, Output: "     1\thello\n"}}})
	}
	data, err := json.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.DecodeRequest(data); err != nil {
			b.Fatal(err)
		}
	}
}
