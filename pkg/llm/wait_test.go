package llm

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// TestOnWaitAfterEvents: a call that is about to wait for more of the
// stream has emitted everything the stream brought so far, so a sink that
// buffers events (pg-llm serve) loses no time by writing them then; and it
// says so before each wait, not after each event.
func TestOnWaitAfterEvents(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "llm", "anthropic", "tool_use.http"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := bytes.Cut(raw, []byte("\n\n"))
	// The stream comes in two parts: up to the first text delta, then,
	// once the client has said it waits, the rest.
	cut := bytes.Index(body, []byte("event: content_block_delta"))
	cut += bytes.Index(body[cut:], []byte("\n\n")) + 2
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body[:cut])
		w.(http.Flusher).Flush()
		select { // until the client waits with the first part's events out
		case <-release:
		case <-time.After(5 * time.Second):
		}
		w.Write(body[cut:])
	}))
	defer srv.Close()
	r := testRouter(t, Options{AnthropicKey: "k", AnthropicBaseURL: srv.URL})
	var (
		mu       sync.Mutex
		events   []string
		at       [][]string // the events emitted at each wait
		released bool
	)
	r.OnWait(func() {
		mu.Lock()
		at = append(at, append([]string(nil), events...))
		if len(events) > 0 && events[len(events)-1] == "text:Okay" && !released {
			released = true
			close(release)
		}
		mu.Unlock()
	})
	_, err = r.Call(t.Context(), testRequest("anthropic/claude-sonnet-4-5"), func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *protocol.StartEvent:
			events = append(events, "start")
		case *protocol.TextEvent:
			events = append(events, "text:"+e.Text)
		case *protocol.ToolCallEvent:
			events = append(events, "tool_call")
		case *protocol.EndEvent:
			events = append(events, "end")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// Waits: before the request, before the first read (the start is
	// out), and once the first part is used up (its text delta is out).
	var sawText bool
	for _, evs := range at {
		if len(evs) > 0 && evs[len(evs)-1] == "text:Okay" {
			sawText = true
		}
	}
	if !sawText || len(at) > 6 {
		t.Fatalf("events at each wait: %q; all events: %q", at, events)
	}
}
