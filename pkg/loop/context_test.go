package loop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/tiktoken-go/tokenizer/codec"
)

// windowModel is a model double that keeps a context window as a
// provider does: it counts each request with the real o200k_base
// tokenizer (the text of the system prompt, tools and messages) and
// answers context_overflow to one whose input and max_tokens pass the
// window, recording it as a violation.
type windowModel struct {
	t      *testing.T
	window int
	next   func(req *protocol.Request, n int) (*protocol.EndEvent, error)

	mu         sync.Mutex
	calls      int
	summaries  int
	largest    int
	violations []string
}

var testO200k = sync.OnceValue(codec.NewO200kBase)

// trueTokens is the provider's count of a request: every text the model
// reads, with a little framing per message.
func trueTokens(req *protocol.Request) int {
	enc := testO200k()
	count := func(s string) int { n, _ := enc.Count(s); return n }
	n := count(req.System)
	for _, t := range req.Tools {
		n += count(t.Name) + count(t.Description) + count(string(t.InputSchema))
	}
	for _, m := range req.Messages {
		n += 3
		for _, b := range m.Content {
			n += count(b.Text) + count(b.Output) + count(string(b.Input)) + count(b.Name) + count(b.Thinking)
		}
	}
	return n
}

func (w *windowModel) Call(_ context.Context, req *protocol.Request, _ func(any)) (*protocol.EndEvent, error) {
	n := trueTokens(req)
	w.mu.Lock()
	w.calls++
	calls := w.calls
	w.largest = max(w.largest, n+req.MaxTokens)
	if n+req.MaxTokens > w.window {
		w.violations = append(w.violations, fmt.Sprintf("request %d: %d input tokens + %d max_tokens > window %d", calls, n, req.MaxTokens, w.window))
		w.mu.Unlock()
		return nil, &ModelError{Event: protocol.ErrorEvent{Type: "error", Kind: protocol.KindContextOverflow, Message: fmt.Sprintf("prompt is too long: %d tokens > %d maximum", n+req.MaxTokens, w.window)}}
	}
	if req.System == summarizeSystem {
		w.summaries++
	}
	w.mu.Unlock()
	end, err := w.next(req, calls)
	if end != nil {
		end.Usage.InputTokens = n // a provider reports what it counted
	}
	return end, err
}

func (w *windowModel) Close() error { return nil }

// bigOutput is about tokens tokens of log-like text in o200k_base.
func bigOutput(tokens int) string {
	var b strings.Builder
	for i := 0; b.Len() < tokens*4; i++ {
		fmt.Fprintf(&b, "%06d ok   github.com/example/pkg%d/handler_%d.go: request served in %dms\n", i, i%17, i%101, i%997)
	}
	return b.String()
}

// The window of issue 16: a 16k window and three tool outputs of 20k
// tokens each. No request passes the window, the long outputs are cut
// to a head and a tail with the whole text saved (0600) in a file the
// model is told about, and the task completes.
func TestWindowHoldsThreeHugeOutputs(t *testing.T) {
	for _, model := range []string{"openai/gpt-4o", "anthropic/claude-sonnet-4-5"} {
		t.Run(model, func(t *testing.T) {
			out := bigOutput(20000)
			if n, _ := testO200k().Count(out); n < 20000 {
				t.Fatalf("the output is only %d tokens", n)
			}
			m := &windowModel{t: t, window: 16000}
			m.next = func(req *protocol.Request, n int) (*protocol.EndEvent, error) {
				if req.System == summarizeSystem {
					return say("SUMMARY")(req)
				}
				tools := 0
				for _, msg := range req.Messages {
					for _, b := range msg.Content {
						if b.Type == protocol.BlockToolResult {
							tools++
						}
					}
				}
				if tools >= 3 {
					return say("done")(req)
				}
				return call("echo", fmt.Sprintf(`{"part":%d}`, tools+1))(req)
			}
			h := newHarness(t, m, okTool(out), "read the three logs")
			h.opts.Model = model
			h.opts.ContextWindow = 16000
			h.opts.MaxTokens = 1000
			h.opts.Reserve = 2048
			res := h.run(t)
			if len(m.violations) > 0 {
				t.Fatalf("requests over the window:\n%s", strings.Join(m.violations, "\n"))
			}
			if res.State != Done || res.TasksDone != 1 {
				t.Fatalf("%+v\n%s", res, h.out.String())
			}
			t.Logf("%s: %d calls, largest request %d tokens of 16000", model, m.calls, m.largest)
			files, _ := filepath.Glob(filepath.Join(h.sess.Dir, "outputs", "*"))
			if len(files) != 3 {
				t.Fatalf("%d saved outputs, want 3", len(files))
			}
			for _, f := range files {
				st, err := os.Stat(f)
				if err != nil || st.Mode().Perm() != 0o600 || st.Size() != int64(len(out)) {
					t.Fatalf("saved output %s: %v %v", f, st.Mode(), err)
				}
			}
			mem, _ := os.ReadFile(filepath.Join(h.sess.Dir, MemoryFile))
			if !strings.Contains(string(mem), "the whole output is in "+filepath.Join(h.sess.Dir, "outputs")) {
				t.Fatal("the model was not told where the whole output is")
			}
		})
	}
}

// A provider that answers context_overflow once (its window is smaller
// than the loop was told): the loop compacts harder and the task
// completes.
func TestOverflowOnceCompactsAndCompletes(t *testing.T) {
	out := bigOutput(1500)
	overflowed := false
	m := &windowModel{t: t, window: 1 << 30}
	m.next = func(req *protocol.Request, n int) (*protocol.EndEvent, error) {
		if req.System == summarizeSystem {
			return say("SUMMARY: read six logs")(req)
		}
		if len(req.Messages) >= 13 && !overflowed {
			overflowed = true
			return nil, &ModelError{Event: protocol.ErrorEvent{Type: "error", Kind: protocol.KindContextOverflow, Message: "prompt is too long"}}
		}
		if len(req.Messages) >= 15 {
			return say("done")(req)
		}
		return call("echo", fmt.Sprintf(`{"n":%d}`, len(req.Messages)))(req)
	}
	h := newHarness(t, m, okTool(out), "t")
	h.opts.ContextWindow = 100000
	h.opts.KeepMessages = 4
	res := h.run(t)
	if res.State != Done || res.TasksDone != 1 || !overflowed {
		t.Fatalf("%+v overflowed=%v\n%s", res, overflowed, h.out.String())
	}
	if m.summaries == 0 || !strings.Contains(h.out.String(), "context overflow reported by the model") {
		t.Fatalf("no compaction after the overflow:\n%s", h.out.String())
	}
}

// A provider that keeps answering context_overflow: after one compaction
// and retry the task fails, and the reason says why.
func TestOverflowTwiceFailsSaying(t *testing.T) {
	m := &windowModel{t: t, window: 1 << 30}
	over := false
	m.next = func(req *protocol.Request, n int) (*protocol.EndEvent, error) {
		if req.System == summarizeSystem {
			return say("S")(req)
		}
		if over = over || len(req.Messages) >= 7; over {
			return nil, &ModelError{Event: protocol.ErrorEvent{Type: "error", Kind: protocol.KindContextOverflow, Message: "prompt is too long"}}
		}
		return call("echo", fmt.Sprintf(`{"n":%d}`, len(req.Messages)))(req)
	}
	h := newHarness(t, m, okTool(bigOutput(500)), "t")
	h.opts.ContextWindow = 100000
	h.opts.KeepMessages = 2
	res := h.run(t)
	if res.State != Done || res.Failed != 1 {
		t.Fatalf("%+v", res)
	}
	if !strings.Contains(h.out.String(), `"status":"failed","reason":"context overflow: the model still found the conversation too long after compacting it`) {
		t.Fatalf("no reason:\n%s", h.out.String())
	}
}

// A task that cannot fit at all (its prompt alone is over the window)
// fails before any request is sent, saying so.
func TestTaskThatCannotFitFails(t *testing.T) {
	m := &windowModel{t: t, window: 8000}
	m.next = func(req *protocol.Request, n int) (*protocol.EndEvent, error) { return say("done")(req) }
	h := newHarness(t, m, okTool(""), bigOutput(10000))
	h.opts.ContextWindow = 8000
	h.opts.MaxTokens = 1000
	h.opts.Reserve = 500
	res := h.run(t)
	if res.Failed != 1 || m.calls != 0 {
		t.Fatalf("%+v, %d calls", res, m.calls)
	}
	if !strings.Contains(h.out.String(), `"reason":"context window: the conversation does not fit: about`) {
		t.Fatalf("no reason:\n%s", h.out.String())
	}
}

// A summary that does not bring the conversation under the hard threshold
// is not made again on the next step: the loop waits for new messages.
func TestUnhelpfulSummaryIsNotRetriedEveryStep(t *testing.T) {
	m := &windowModel{t: t, window: 1 << 30}
	steps := 0
	m.next = func(req *protocol.Request, n int) (*protocol.EndEvent, error) {
		if req.System == summarizeSystem {
			return say(bigOutput(1700))(req) // longer than what it replaces
		}
		steps++
		if steps > 30 {
			return say("done")(req)
		}
		end, err := call("echo", fmt.Sprintf(`{"n":%d}`, steps))(req)
		end.Message.Content = append(protocol.Content{{Type: protocol.BlockText, Text: bigOutput(300)}}, end.Message.Content...)
		return end, err
	}
	h := newHarness(t, m, okTool(bigOutput(300)), "t")
	h.opts.ContextWindow = 8000
	h.opts.MaxTokens = 500
	h.opts.Reserve = 500
	h.opts.ContextSoft, h.opts.ContextHard = 0.3, 0.4
	h.opts.KeepMessages = 4
	res := h.run(t)
	if res.State != Done || res.TasksDone != 1 {
		t.Fatalf("%+v\n%s", res, h.out.String())
	}
	if len(m.violations) > 0 {
		t.Fatalf("requests over the window:\n%s", strings.Join(m.violations, "\n"))
	}
	// 30 steps of 2 messages: at most one summary per 4 new messages.
	if m.summaries == 0 || m.summaries > 30*2/4 {
		t.Fatalf("%d summaries in 30 steps", m.summaries)
	}
	t.Logf("%d summaries in 30 steps", m.summaries)
}

// headTail never splits a rune, and keeps the head of binary output.
func TestHeadTailRunes(t *testing.T) {
	s := strings.Repeat("é", 100) // 2 bytes each
	for head := 1; head < 20; head++ {
		got := headTail(s, head, head, "|")
		h, tl, _ := strings.Cut(got, "|")
		if !utf8.ValidString(h) || !utf8.ValidString(tl) {
			t.Fatalf("head %d: %q", head, got)
		}
	}
	bin := strings.Repeat("\xff\x80\xfe", 1000)
	if got := headTail(bin, 600, 300, "|"); len(got) < 850 {
		t.Fatalf("binary output lost its head: %d bytes kept", len(got))
	}
}
