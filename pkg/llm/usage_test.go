package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/powerglide/powerglide/pkg/llm/llmtest"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// A server that reports negative usage (once priced at -$1,499,999.99997,
// which a budget then counted as money earned) fails the call: kind
// server, not retried, and no usage or end event goes out. The same for
// every provider: anthropic, openai, openai-compatible and replay.
func TestNegativeUsageRefused(t *testing.T) {
	patched := func(family, old, new string) *llmtest.Response {
		r := fixtures(t, family, "tool_use")[0]
		if !bytes.Contains(r.Body, []byte(old)) {
			t.Fatalf("%s fixture lacks %s", family, old)
		}
		r.Body = bytes.ReplaceAll(r.Body, []byte(old), []byte(new))
		return r
	}
	dir := t.TempDir()
	replay := filepath.Join(dir, "neg.jsonl")
	os.WriteFile(replay, []byte(`{"type":"call","events":[{"type":"end","stop_reason":"end_turn","message":{"role":"assistant","content":"hi"},"usage":{"input_tokens":10,"output_tokens":-100000000000,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0}}]}
`), 0o644)
	cases := []struct {
		name  string
		resp  *llmtest.Response
		opts  func(url string) Options
		model string
	}{
		{"anthropic", patched("anthropic", `"usage":{"output_tokens":89}`, `"usage":{"output_tokens":-100000000000}`),
			func(url string) Options { return Options{AnthropicKey: "k", AnthropicBaseURL: url} }, "anthropic/claude-sonnet-4-5"},
		{"anthropic input", patched("anthropic", `"input_tokens":472`, `"input_tokens":-472`),
			func(url string) Options { return Options{AnthropicKey: "k", AnthropicBaseURL: url} }, "anthropic/claude-sonnet-4-5"},
		{"openai", patched("openai", `"completion_tokens":89`, `"completion_tokens":-100000000000`),
			func(url string) Options { return Options{OpenAIKey: "sk", OpenAIBaseURL: url + "/v1"} }, "openai/gpt-4o"},
		{"openai cached", patched("openai", `"cached_tokens":3000`, `"cached_tokens":-3000`),
			func(url string) Options { return Options{OpenAIKey: "sk", OpenAIBaseURL: url + "/v1"} }, "openai/gpt-4o"},
		{"compatible", patched("openai", `"prompt_tokens":4472`, `"prompt_tokens":-4472`),
			func(url string) Options {
				return Options{Providers: json.RawMessage(`{"box":{"kind":"openai-compatible","base_url":"` + url + `/v1"}}`)}
			}, "box/qwen3:8b"},
		{"replay", nil, func(string) Options { return Options{} }, "replay/" + replay},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := ""
			var srv *llmtest.Server
			if c.resp != nil {
				srv = llmtest.NewServer(c.resp)
				srv.SetRepeat(true)
				defer srv.Close()
				url = srv.URL
			}
			events, end, err := collect(testRouter(t, c.opts(url)), testRequest(c.model))
			var e *Error
			if !errors.As(err, &e) || e.Kind != protocol.KindServer || e.Retryable || end != nil {
				t.Fatalf("err %v (%+v), end %v: want a server error, not retryable", err, e, end)
			}
			for _, ev := range events {
				switch ev.(type) {
				case *protocol.UsageEvent, *protocol.EndEvent, *protocol.RetryEvent:
					t.Fatalf("event %+v after negative usage", ev)
				}
			}
			if last, ok := events[len(events)-1].(*protocol.ErrorEvent); !ok || last.Kind != protocol.KindServer || last.Retryable {
				t.Fatalf("last event %+v", events[len(events)-1])
			}
			if srv != nil && len(srv.Requests()) != 1 {
				t.Fatalf("%d requests: a broken usage must not be retried", len(srv.Requests()))
			}
		})
	}
}
