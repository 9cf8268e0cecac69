package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/llm/llmtest"
	"github.com/powerglide/powerglide/pkg/protocol"
)

var fixtureDir = filepath.Join("..", "..", "testdata", "llm")

func fixtures(t testing.TB, family string, names ...string) []*llmtest.Response {
	t.Helper()
	var paths []string
	for _, n := range names {
		paths = append(paths, filepath.Join(fixtureDir, family, n+".http"))
	}
	rs, err := llmtest.Load(paths...)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// fixturesIn loads each named fixture from the first family directory
// that has it: a compatible server's own streams, and OpenAI's error
// documents for the rest.
func fixturesIn(t testing.TB, families []string, names ...string) []*llmtest.Response {
	t.Helper()
	var out []*llmtest.Response
	for _, n := range names {
		for i, fam := range families {
			if _, err := os.Stat(filepath.Join(fixtureDir, fam, n+".http")); err == nil || i == len(families)-1 {
				out = append(out, fixtures(t, fam, n)...)
				break
			}
		}
	}
	return out
}

// summary renders events in a provider-neutral form: adjacent text or
// thinking deltas are joined, retries show their reason's kind.
func summary(events []any) []string {
	var out []string
	for _, ev := range events {
		var s string
		switch e := ev.(type) {
		case *protocol.StartEvent:
			s = "start"
		case *protocol.TextEvent:
			if n := len(out); n > 0 && strings.HasPrefix(out[n-1], "text:") {
				out[n-1] += e.Text
				continue
			}
			s = "text:" + e.Text
		case *protocol.ThinkingEvent:
			if n := len(out); n > 0 && strings.HasPrefix(out[n-1], "thinking:") {
				out[n-1] += e.Text
				continue
			}
			s = "thinking:" + e.Text
		case *protocol.ToolCallEvent:
			s = fmt.Sprintf("tool_call:%s %s", e.Call.Name, e.Call.Input)
		case *protocol.UsageEvent:
			s = "usage"
		case *protocol.RetryEvent:
			kind, _, _ := strings.Cut(e.Reason, ":")
			s = fmt.Sprintf("retry:%d %s", e.Attempt, kind)
		case *protocol.FallbackEvent:
			s = "fallback:" + e.From + ">" + e.To
		case *protocol.ErrorEvent:
			s = "error:" + e.Kind
		case *protocol.EndEvent:
			s = "end:" + e.StopReason
		default:
			s = fmt.Sprintf("?%T", ev)
		}
		out = append(out, s)
	}
	return out
}

const (
	helloText   = "text:Hello! How can I help you today?"
	weatherText = "text:Okay, let's check the weather for San Francisco, CA:"
	weatherCall = `tool_call:get_weather {"location":"San Francisco, CA","unit":"fahrenheit"}`
	timeCall    = `tool_call:get_time {"timezone":"America/Los_Angeles"}`
	gcdThinking = "thinking:I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + 147\n462 = 3 × 147 + 21\n147 = 7 × 21 + 0\n\nSo GCD(1071, 462) = 21"
	gcdText     = "text:The greatest common divisor of 1071 and 462 is **21**."
)

// scenarios is the matrix every provider runs.
var scenarios = []struct {
	name     string
	fixtures []string
	want     []string
	kind     string // error kind, "" for success
	requests int
}{
	{"text", []string{"text"}, []string{"start", helloText, "usage", "end:end_turn"}, "", 1},
	{"tool_use", []string{"tool_use"}, []string{"start", weatherText, weatherCall, timeCall, "usage", "end:tool_use"}, "", 1},
	{"thinking", []string{"thinking"}, []string{"start", gcdThinking, gcdText, "usage", "end:end_turn"}, "", 1},
	{"midstream_error", []string{"midstream_error"}, []string{"start", "text:Hello", "error:overloaded"}, protocol.KindOverloaded, 1},
	{"truncated", []string{"truncated"}, []string{"start", "text:Hello", "error:network"}, protocol.KindNetwork, 1},
	// The server closes the stream cleanly after the finish (OpenAI: the
	// finish_reason chunk, without the usage chunk and [DONE]; Anthropic:
	// message_delta without message_stop): cut off, not a success with no
	// usage.
	{"truncated_after_finish", []string{"truncated_after_finish"}, []string{"start", helloText, "error:network"}, protocol.KindNetwork, 1},
	{"rate_limit_then_ok", []string{"rate_limit", "text"}, []string{"retry:1 rate_limit", "start", helloText, "usage", "end:end_turn"}, "", 2},
	{"overloaded_then_ok", []string{"overloaded", "text"}, []string{"retry:1 overloaded", "start", helloText, "usage", "end:end_turn"}, "", 2},
	{"server_error_then_ok", []string{"server_error", "text"}, []string{"retry:1 server", "start", helloText, "usage", "end:end_turn"}, "", 2},
	{"retries_exhausted", []string{"overloaded", "overloaded", "overloaded"}, []string{"retry:1 overloaded", "retry:2 overloaded", "error:overloaded"}, protocol.KindOverloaded, 3},
	{"auth", []string{"auth"}, []string{"error:auth"}, protocol.KindAuth, 1},
	{"context_overflow", []string{"context_overflow"}, []string{"error:context_overflow"}, protocol.KindContextOverflow, 1},
	{"bad_request", []string{"bad_request"}, []string{"error:bad_request"}, protocol.KindBadRequest, 1},
	// max_tokens stops the answer while a tool call's input is still being
	// written: the text is kept, the call is reported incomplete (see
	// checkIncomplete) and never offered; not an error, not retried.
	{"max_tokens_in_tool_call", []string{"max_tokens_in_tool_call"}, []string{"start", weatherText, "usage", "end:max_tokens"}, "", 1},
}

// incompleteCalls is the name of each scenario's incomplete tool calls.
var incompleteCalls = map[string]string{"max_tokens_in_tool_call": "get_weather"}

// checkIncomplete checks the end's incomplete tool calls and that none of
// them is in the message.
func checkIncomplete(t *testing.T, scenario string, end *protocol.EndEvent) {
	t.Helper()
	if end == nil {
		return
	}
	var names []string
	for _, c := range end.Incomplete {
		names = append(names, c.Name)
		if c.ID == "" || c.PartialInput == "" || json.Valid([]byte(c.PartialInput)) {
			t.Fatalf("incomplete call %+v: want an id and a partial, unparsable input", c)
		}
	}
	if got := strings.Join(names, ","); got != incompleteCalls[scenario] {
		t.Fatalf("incomplete tool calls %q, want %q", got, incompleteCalls[scenario])
	}
	if n := len(end.Message.Content.ToolCalls()); n != 0 && incompleteCalls[scenario] != "" {
		t.Fatalf("the message offers %d tool calls, want none", n)
	}
	if incompleteCalls[scenario] != "" && (end.Usage.OutputTokens != 64 || end.Usage.InputTokens == 0) {
		t.Fatalf("usage %+v, want the stream's", end.Usage)
	}
}

// provider under test: the fixture family and how to point a router at a
// server.
type providerCase struct {
	name, model string
	families    []string // fixture directories, searched in order
	opts        func(url string) Options
}

// compatible points the provider name, as an openai-compatible provider,
// at url.
func compatible(name string) func(url string) Options {
	return func(url string) Options {
		return Options{Providers: json.RawMessage(`{"` + name + `":{"kind":"openai-compatible","base_url":"` + url + `/v1"}}`)}
	}
}

var providerCases = []providerCase{
	{"anthropic", "anthropic/claude-sonnet-4-5", []string{"anthropic"}, func(url string) Options {
		return Options{AnthropicKey: "sk-ant-test", AnthropicBaseURL: url}
	}},
	{"openai", "openai/gpt-4o", []string{"openai"}, func(url string) Options {
		return Options{OpenAIKey: "sk-test", OpenAIBaseURL: url + "/v1"}
	}},
	// OpenAI's own streams through the compatible provider.
	{"openai-compatible", "local/qwen3:8b", []string{"openai"}, compatible("local")},
	// The streams of the servers themselves: Ollama (reasoning, whole tool
	// calls in one chunk, no logprobs or service_tier) and llama.cpp server
	// (sorted keys, content null in the role chunk, reasoning_content,
	// timings, its own overflow error); their error documents otherwise
	// follow OpenAI's.
	{"ollama", "ollama/qwen3:8b", []string{"ollama", "openai"}, compatible("ollama")},
	{"llamacpp", "llamacpp/qwen3-8b", []string{"llamacpp", "openai"}, compatible("llamacpp")},
}

func testRouter(t testing.TB, o Options) *Router {
	t.Helper()
	o.Retries = 2
	o.Backoff = Backoff{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond, MaxRetryAfter: time.Minute,
		Sleep: func(context.Context, time.Duration) error { return nil }, Jitter: func() float64 { return 0 }}
	r, err := NewRouter(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testRequest(model string) *protocol.Request {
	return &protocol.Request{Model: model, System: "You are terse.", Messages: []protocol.Message{
		{Role: "user", Content: protocol.Content{{Type: "text", Text: "What's the weather in San Francisco?"}}}},
		Tools: []protocol.ToolDef{{Name: "get_weather", Description: "Get the weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}}}`)}}}
}

func collect(r *Router, req *protocol.Request) ([]any, *protocol.EndEvent, error) {
	var events []any
	end, err := r.Call(context.Background(), req, func(ev any) { events = append(events, ev) })
	return events, end, err
}

func checkOutcome(t *testing.T, events []any, end *protocol.EndEvent, err error, kind string) {
	t.Helper()
	if kind == "" {
		if err != nil {
			t.Fatalf("call failed: %v", err)
		}
		if end.Message.Role != "assistant" || len(end.Message.Content) == 0 {
			t.Fatalf("end message: %+v", end.Message)
		}
		return
	}
	e, ok := err.(*Error)
	if !ok || e.Kind != kind {
		t.Fatalf("error = %#v, want kind %s", err, kind)
	}
	for _, ev := range events {
		if _, isEnd := ev.(*protocol.EndEvent); isEnd {
			t.Fatal("a failed call emitted an end event")
		}
	}
}

// TestConformance runs the scenario matrix against every provider over a
// local server replaying wire transcripts, then records each live run and
// checks that the replay provider plays back the same events.
func TestConformance(t *testing.T) {
	for _, pc := range providerCases {
		for _, sc := range scenarios {
			t.Run(pc.name+"/"+sc.name, func(t *testing.T) {
				srv := llmtest.NewServer(fixturesIn(t, pc.families, sc.fixtures...)...)
				defer srv.Close()
				r := testRouter(t, pc.opts(srv.URL))
				req := testRequest(pc.model)
				events, end, err := collect(r, req)
				if got := summary(events); strings.Join(got, "\n") != strings.Join(sc.want, "\n") {
					t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(sc.want, "\n"))
				}
				checkOutcome(t, events, end, err, sc.kind)
				checkIncomplete(t, sc.name, end)
				if n := len(srv.Requests()); n != sc.requests {
					t.Fatalf("server saw %d requests, want %d", n, sc.requests)
				}
				for _, ev := range events {
					b, _ := json.Marshal(ev)
					if _, err := protocol.ModelEvents.Decode(b); err != nil {
						t.Fatalf("event %s: %v", b, err)
					}
				}

				// Record, then replay: the same events come back.
				file := filepath.Join(t.TempDir(), "session.jsonl")
				if err := (&Recorder{Path: file}).Record(req, events); err != nil {
					t.Fatal(err)
				}
				rr := testRouter(t, Options{})
				rreq := *req
				rreq.Model = "replay/" + file
				revents, rend, rerr := collect(rr, &rreq)
				if got := summary(revents); strings.Join(got, "\n") != strings.Join(sc.want, "\n") {
					t.Fatalf("replayed events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(sc.want, "\n"))
				}
				checkOutcome(t, revents, rend, rerr, sc.kind)
				checkIncomplete(t, sc.name, rend)
				if end != nil {
					a, _ := json.Marshal(end.Message)
					b, _ := json.Marshal(rend.Message)
					if string(a) != string(b) || end.Usage != rend.Usage {
						t.Fatalf("replayed end differs:\n%s %+v\n%s %+v", a, end.Usage, b, rend.Usage)
					}
				}
			})
		}
	}
}
