package llm

import (
	"errors"
	"math"
	"testing"

	"github.com/powerglide/powerglide/pkg/llm/llmtest"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// A stream cut after message_start is retried, and the provider charges
// the cut attempt's input all the same: the end's usage counts it, priced,
// and so does the error of a call whose every attempt was cut.
func TestCutAttemptsAreCharged(t *testing.T) {
	opts := func(url string) Options { return Options{AnthropicKey: "k", AnthropicBaseURL: url} }
	// two cut attempts (2880 input tokens each), then text.http (25 in, 15 out)
	srv := llmtest.NewServer(fixtures(t, "anthropic", "cut_after_start", "cut_after_start", "text")...)
	defer srv.Close()
	events, end, err := collect(testRouter(t, opts(srv.URL)), testRequest("anthropic/claude-sonnet-4-5"))
	if err != nil {
		t.Fatal(err)
	}
	retries := 0
	var usage *protocol.UsageEvent
	for _, ev := range events {
		switch e := ev.(type) {
		case *protocol.RetryEvent:
			retries++
		case *protocol.UsageEvent:
			usage = e
		}
	}
	want := protocol.Usage{InputTokens: 2*2880 + 25, OutputTokens: 2 + 15}
	want.CostUSD = (float64(want.InputTokens)*3 + float64(want.OutputTokens)*15) / 1e6
	if retries != 2 || end.Usage.InputTokens != want.InputTokens || end.Usage.OutputTokens != want.OutputTokens || math.Abs(end.Usage.CostUSD-want.CostUSD) > 1e-12 {
		t.Fatalf("%d retries, end usage %+v, want %+v", retries, end.Usage, want)
	}
	if usage == nil || usage.Usage != end.Usage {
		t.Fatalf("usage event %+v, end usage %+v", usage, end.Usage)
	}

	// every attempt cut (testRouter retries twice): the error carries the
	// three attempts' input, in the error event too
	cut := llmtest.NewServer(fixtures(t, "anthropic", "cut_after_start")...)
	cut.SetRepeat(true)
	defer cut.Close()
	events, end, err = collect(testRouter(t, opts(cut.URL)), testRequest("anthropic/claude-sonnet-4-5"))
	var e *Error
	if !errors.As(err, &e) || end != nil || e.Usage.InputTokens != 3*2880 || e.Usage.CostUSD <= 0 {
		t.Fatalf("err %v (%+v), end %v", err, e, end)
	}
	last, ok := events[len(events)-1].(*protocol.ErrorEvent)
	if !ok || last.Usage == nil || *last.Usage != e.Usage {
		t.Fatalf("last event %+v, want the error with usage %+v", events[len(events)-1], e.Usage)
	}

	// a fallback chain: the first model's cut attempts count in the end
	// of the model that answered
	first := llmtest.NewServer(fixtures(t, "anthropic", "cut_after_start")...)
	first.SetRepeat(true)
	defer first.Close()
	good := llmtest.NewServer(fixtures(t, "openai", "text")...)
	defer good.Close()
	o := opts(first.URL)
	o.OpenAIKey, o.OpenAIBaseURL = "sk", good.URL+"/v1"
	_, end, err = collect(testRouter(t, o), testRequest("anthropic/claude-sonnet-4-5,openai/gpt-4o"))
	if err != nil {
		t.Fatal(err)
	}
	if end.Usage.InputTokens < 3*2880 || end.Usage.CostUSD < 3*2880*3/1e6 {
		t.Fatalf("end usage %+v: the first model's cut attempts are missing", end.Usage)
	}
}
