package llm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/llm/llmtest"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// A server that never ends its answer cannot take all the memory: once the
// answer passes the bound, the call ends with kind response_too_large, is
// not retried and does not fall back, and the connection is dropped.
func TestEndlessStreamIsBounded(t *testing.T) {
	for _, shape := range llmtest.EndlessShapes {
		for _, provider := range []string{"anthropic", "openai"} {
			if p, _, _ := strings.Cut(shape, "-"); (p == "anthropic" || p == "openai") && p != provider {
				continue
			}
			t.Run(shape+"/"+provider, func(t *testing.T) {
				srv, err := llmtest.NewEndless(shape)
				if err != nil {
					t.Fatal(err)
				}
				defer srv.Close()
				const limit = 1 << 20
				r := testRouter(t, Options{AnthropicKey: "k", AnthropicBaseURL: srv.URL, OpenAIKey: "k", OpenAIBaseURL: srv.URL,
					MaxResponseBytes: limit})
				model := provider + "/m"
				req := testRequest(model + ",anthropic/fallback")
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var events []any
				_, err = r.Call(ctx, req, func(ev any) { events = append(events, ev) })
				e, ok := err.(*Error)
				want := protocol.KindResponseTooLarge
				if shape == "error-body" {
					want = protocol.KindServer // the 500 it is, read as far as 1 MiB
				}
				if !ok || e.Kind != want {
					t.Fatalf("err = %v (%T), want kind %s", err, err, want)
				}
				for _, ev := range events {
					switch ev := ev.(type) {
					case *protocol.RetryEvent, *protocol.FallbackEvent:
						if want == protocol.KindResponseTooLarge {
							t.Errorf("response_too_large was retried or fell back: %+v", ev)
						}
					}
				}
				if want == protocol.KindResponseTooLarge {
					if e.Retryable || !strings.Contains(e.Message, "response too large") || !strings.Contains(e.Message, "1 MiB") {
						t.Errorf("error: %+v", e)
					}
				}
				deadline := time.Now().Add(10 * time.Second)
				for srv.Hangups() == 0 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if srv.Hangups() == 0 {
					t.Error("the client never hung up on the endless answer")
				}
			})
		}
	}
}

// The replayed answer is held to the same bound as a live one.
func TestReplayIsBounded(t *testing.T) {
	em := NewEmitter("x", nil)
	em.max = 10
	if err := em.hold(10); err != nil {
		t.Fatal(err)
	}
	err := em.hold(1)
	if e, ok := err.(*Error); !ok || e.Kind != protocol.KindResponseTooLarge || e.Message != "response too large: its text, thinking and tool input passed the limit of 10 bytes for one answer" {
		t.Fatalf("%#v", err)
	}
}
