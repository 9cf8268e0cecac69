package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/llm/llmtest"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// bigAnthropic is an SSE stream of n text deltas and a tool call whose
// input arrives in n/10 fragments.
func bigAnthropic(n int) []byte {
	var b bytes.Buffer
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"token %d of a longer answer, \"}}\n\n", i)
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"write\",\"input\":{}}}\n\n")
	b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"text\\\": \\\"\"}}\n\n")
	for i := 0; i < n/10; i++ {
		b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"abcdefghij\"}}\n\n")
	}
	b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"}\"}}\n\n")
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n")
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.Bytes()
}

func bigOpenAI(n int) []byte {
	var b bytes.Buffer
	head := `"id":"chatcmpl-1","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o","system_fingerprint":"fp_1"`
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "data: {%s,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token %d of a longer answer, \"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n", head, i)
	}
	fmt.Fprintf(&b, "data: {%s,\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"write\",\"arguments\":\"{\\\"text\\\": \\\"\"}}]},\"finish_reason\":null}]}\n\n", head)
	for i := 0; i < n/10; i++ {
		fmt.Fprintf(&b, "data: {%s,\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"abcdefghij\"}}]},\"finish_reason\":null}]}\n\n", head)
	}
	fmt.Fprintf(&b, "data: {%s,\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"}\"}}]},\"finish_reason\":null}]}\n\n", head)
	fmt.Fprintf(&b, "data: {%s,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n", head)
	fmt.Fprintf(&b, "data: {%s,\"choices\":[],\"usage\":{\"prompt_tokens\":25,\"completion_tokens\":15,\"total_tokens\":40}}\n\ndata: [DONE]\n\n", head)
	return b.Bytes()
}

// BenchmarkSSEDecode measures event parsing: SSE framing, the SDK's
// decoding of each event and our assembly, in MB/s of SSE.
func BenchmarkSSEDecode(b *testing.B) {
	for _, c := range []struct {
		name   string
		body   []byte
		decode func([]byte, *Emitter) error
	}{
		{"anthropic", bigAnthropic(5000), func(body []byte, em *Emitter) error {
			_, err := decodeAnthropic(anthropicStreamOf(body), em)
			return err
		}},
		{"openai", bigOpenAI(5000), func(body []byte, em *Emitter) error {
			_, err := decodeOpenAI(openaiStreamOf(body), em, false)
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			n := 0
			em := NewEmitter("", func(any) { n++ })
			cpu0 := cpuTime()
			iters := 0
			for b.Loop() {
				if err := c.decode(c.body, em); err != nil {
					b.Fatal(err)
				}
				iters++
			}
			// On a shared machine wall time says little; CPU time spent is
			// what the decoder costs.
			if cpu := cpuTime() - cpu0; cpu > 0 {
				b.ReportMetric(float64(len(c.body)*iters)/1e6/cpu.Seconds(), "MB/cpu-s")
			}
			if n == 0 {
				b.Fatal("no events")
			}
		})
	}
}

// BenchmarkCallLocal is one whole call through the router against a local
// server: the in-process cost that pg-llm serve adds its pipe to.
func BenchmarkCallLocal(b *testing.B) {
	rs := fixtures(b, "anthropic", "text")
	srv := llmtest.NewServer(rs...)
	srv.SetRepeat(true)
	defer srv.Close()
	r := testRouter(b, Options{AnthropicKey: "k", AnthropicBaseURL: srv.URL})
	req := testRequest("anthropic/claude-sonnet-4-5")
	for b.Loop() {
		if _, err := r.Call(context.Background(), req, func(any) {}); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestBigStreamsDecode(t *testing.T) {
	var text strings.Builder
	em := NewEmitter("", func(ev any) {})
	end, err := decodeAnthropic(anthropicStreamOf(bigAnthropic(100)), em)
	if err != nil || len(end.Message.Content) != 2 || len(end.Message.Content[1].Input) != 10*10+len(`{"text":""}`) {
		t.Fatalf("%v %+v", err, end)
	}
	end, err = decodeOpenAI(openaiStreamOf(bigOpenAI(100)), em, false)
	if err != nil || len(end.Message.Content) != 2 {
		t.Fatalf("%v %+v", err, end)
	}
	_ = text
}

// agentTools is a tool list of an agent's size (pg-tool list prints about
// 10 KB): n tools with a paragraph of description and a schema each.
func agentTools(n int) []protocol.ToolDef {
	defs := make([]protocol.ToolDef, n)
	for i := range defs {
		defs[i] = protocol.ToolDef{Name: fmt.Sprintf("tool%d", i),
			Description: strings.Repeat("Runs one thing in the workspace and returns what it printed; long outputs keep their head and tail. ", 8),
			InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"the command line"},"timeout":{"type":"integer","description":"seconds"}},"required":["command"]}`)}
	}
	return defs
}

// BenchmarkBody is the building of one request body of an agent's
// conversation of 10, 100 and 1,000 messages, with a 2 KB system prompt
// and 10 KB of tools, the encodings of the messages already sent cached
// (as in serve mode): what it costs beyond copying the bytes sent.
func BenchmarkBody(b *testing.B) {
	system := strings.Repeat("You are a coding agent. Work in small steps & check each one. ", 32)
	tools := agentTools(8)
	for _, n := range []int{10, 100, 1000} {
		for _, p := range []struct {
			name string
			body func(string, *protocol.Request) ([]byte, error)
		}{
			{"anthropic", NewAnthropic("anthropic", "k", "", nil).body},
			{"openai", NewOpenAI("openai", "k", "", false, nil).body},
		} {
			b.Run(fmt.Sprintf("msgs=%d/%s", n, p.name), func(b *testing.B) {
				req := &protocol.Request{System: system, Tools: tools, Cache: true, MaxTokens: 8192, Messages: growing(n / 2)[:n]}
				size := 0
				for b.Loop() {
					body, err := p.body("claude-sonnet-4-5", req)
					if err != nil {
						b.Fatal(err)
					}
					size = len(body)
				}
				b.SetBytes(int64(size))
			})
		}
	}
}
