package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// encodingLLM answers at once after encoding the request as the pg-llm
// serve component does, so a step's cost includes the encoding.
type encodingLLM struct{ encode bool }

func (l encodingLLM) Call(_ context.Context, req *protocol.Request, _ func(any)) (*protocol.EndEvent, error) {
	if l.encode {
		if _, err := marshalLine(req); err != nil {
			return nil, err
		}
	}
	text := "ok"
	if req.System == summarizeSystem {
		text = "SUMMARY: the work so far"
	}
	return &protocol.EndEvent{Type: "end", StopReason: "tool_use", Message: protocol.Message{Role: "assistant", Content: protocol.Content{
		{Type: "text", Text: text}, {Type: "tool_call", ID: "next", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)}}},
		Usage: protocol.Usage{InputTokens: 10, OutputTokens: 10}}, nil
}

func (encodingLLM) Close() error { return nil }

// benchConv is a task's conversation of n messages after the prompt:
// tool calls and their results of about 400 bytes.
func benchConv(n int) []protocol.Message {
	conv := []protocol.Message{{Role: "user", Content: protocol.Content{{Type: "text", Text: "make the tests pass"}}}}
	out := strings.Repeat("ok   github.com/example/pkg/handler.go:42: served\n", 8)
	for i := 0; len(conv) < n+1; i++ {
		id := fmt.Sprintf("c%d", i)
		conv = append(conv,
			protocol.Message{Role: "assistant", Content: protocol.Content{{Type: "tool_call", ID: id, Name: "bash", Input: json.RawMessage(fmt.Sprintf(`{"command":"go test ./pkg%d"}`, i))}}},
			protocol.Message{Role: "tool", Content: protocol.Content{{Type: "tool_result", ID: id, Output: fmt.Sprintf("%d\n%s", i, out)}}})
	}
	return conv[:n+1]
}

// benchRunner is a runner in the thinking state of a task whose
// conversation is conv, with a session, events to nowhere and an instant
// model.
func benchRunner(b *testing.B, model string, encode bool, window int) *Runner {
	home := b.TempDir()
	sess, err := CreateSession(home, home, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sess.Close() })
	r, err := NewRunner(Options{Workdir: home, Model: model, LLM: encodingLLM{encode: encode}, Tools: okTool(""), MaxTokens: 8192, Reserve: 2048,
		ContextWindow: window, Source: &ListSource{}, Events: NewEmitter(io.Discard, false), Session: sess})
	if err != nil {
		b.Fatal(err)
	}
	r.tools, r.sys, r.state = nil, DefaultSystem, Thinking
	task := NewTask(TaskInput{ID: "t", Prompt: "make the tests pass"}, time.Now())
	ctx, cancel := context.WithCancelCause(context.Background())
	b.Cleanup(func() { cancel(nil) })
	r.runCtx = context.Background()
	r.cur = &taskRun{task: &task, ctx: ctx, cancel: cancel}
	return r
}

// BenchmarkStepOverhead is the loop's own work in one step (pace, the
// window check, the budget check, the model call's bookkeeping, the
// session memory and the events) against an instant model, by
// conversation length, with the tokenizer of an OpenAI model and with the
// byte ratio; "encoded" adds the encoding of the request that a coprocess
// model needs.
func BenchmarkStepOverhead(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		for _, c := range []struct {
			name, model string
			encode      bool
		}{{"bytes", "anthropic/claude-sonnet-4-5", false}, {"o200k", "openai/gpt-4o", false}, {"bytes+encoded", "anthropic/claude-sonnet-4-5", true}} {
			b.Run(fmt.Sprintf("msgs=%d/%s", n, c.name), func(b *testing.B) {
				r := benchRunner(b, c.model, c.encode, 200000)
				conv := benchConv(n)
				r.cur.conv = append([]protocol.Message(nil), conv...)
				r.thinking(context.Background()) // the first sight of each text
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					r.cur.conv = append(r.cur.conv[:0], conv...)
					if in, reason := r.thinking(context.Background()); in != ToolCalls {
						b.Fatalf("%s %s", in, reason)
					}
				}
			})
		}
	}
}

// BenchmarkCompact1000 is the harness time of compacting a 1,000-message
// conversation that is over the hard threshold: pruning, the transcript
// and its cut, the summary applied and remembered, the estimates. The
// model answers the summary call at once (its time is not the harness's).
func BenchmarkCompact1000(b *testing.B) {
	for _, c := range []struct{ name, model string }{{"bytes", "anthropic/claude-sonnet-4-5"}, {"o200k", "openai/gpt-4o"}} {
		b.Run(c.name, func(b *testing.B) {
			conv := benchConv(1000)
			// a window the conversation fills past the hard threshold
			r := benchRunner(b, c.model, false, 0)
			est := r.est.Request(r.request(conv))
			r = benchRunner(b, c.model, false, est+8192+2048)
			r.o.ContextHard, r.o.ContextSoft = 0.1, 0.1
			r.est.Request(r.request(conv)) // a real run has counted its messages before
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.cur.conv = append([]protocol.Message(nil), conv...)
				r.cur.summaryAgain = 0
				if err := r.compact(context.Background(), r.est.Request(r.request(r.cur.conv)), false); err != nil {
					b.Fatal(err)
				}
				if len(r.cur.conv) >= len(conv) {
					b.Fatalf("not compacted: %d messages", len(r.cur.conv))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/compaction")
		})
	}
}
