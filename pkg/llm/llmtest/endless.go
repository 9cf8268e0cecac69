package llmtest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Endless shapes: how a server that never ends its answer misbehaves.
var EndlessShapes = []string{
	"anthropic-text",     // text deltas forever
	"anthropic-thinking", // thinking deltas forever
	"anthropic-tool",     // one tool call whose input never ends
	"openai-text",        // content deltas forever
	"openai-reasoning",   // reasoning_content deltas forever
	"openai-tool",        // tool-call argument fragments forever
	"line",               // one line that never ends
	"event",              // data lines that never get the blank line ending their event
	"error-body",         // HTTP 500 with a body that never ends
}

// Endless is a server whose every answer streams forever in one of
// EndlessShapes, until the client goes away or the server is closed.
type Endless struct {
	*httptest.Server

	shape string
	mu    sync.Mutex
	sent  int64
	ended int // answers that ended because the client went away
}

// NewEndless starts an endless server of the given shape.
func NewEndless(shape string) (*Endless, error) {
	known := false
	for _, s := range EndlessShapes {
		known = known || s == shape
	}
	if !known {
		return nil, fmt.Errorf("llmtest: no endless shape %q (known: %s)", shape, strings.Join(EndlessShapes, ", "))
	}
	e := &Endless{shape: shape}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	return e, nil
}

// Sent is how many bytes of answers went out.
func (e *Endless) Sent() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sent
}

// Hangups is how many answers ended because the client stopped reading.
func (e *Endless) Hangups() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ended
}

func (e *Endless) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	head, chunk := e.parts()
	w.Header().Set("Content-Type", "text/event-stream")
	if e.shape == "error-body" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
	}
	fl, _ := w.(http.Flusher)
	write := func(s string) bool {
		n, err := io.WriteString(w, s)
		e.mu.Lock()
		e.sent += int64(n)
		e.mu.Unlock()
		return err == nil && r.Context().Err() == nil
	}
	if !write(head) {
		return
	}
	// Large writes, flushed now and then: fast enough that a test reaches
	// a limit of megabytes in well under a second.
	big := strings.Repeat(chunk, max(1, (64<<10)/len(chunk)))
	for {
		if !write(big) {
			e.mu.Lock()
			e.ended++
			e.mu.Unlock()
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

// parts returns what an answer starts with and what it repeats forever.
func (e *Endless) parts() (head, chunk string) {
	const (
		aStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
		oHead  = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n"
	)
	switch e.shape {
	case "anthropic-text":
		return aStart + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"all work and no play \"}}\n\n"
	case "anthropic-thinking":
		return aStart + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm, and then \"}}\n\n"
	case "anthropic-tool":
		return aStart + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"write\",\"input\":{}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"content\\\":\\\"\"}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"more and more \"}}\n\n"
	case "openai-text":
		return oHead, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"all work and no play \"}}]}\n\n"
	case "openai-reasoning":
		return oHead, "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hmm, and then \"}}]}\n\n"
	case "openai-tool":
		return oHead + "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"write\",\"arguments\":\"{\\\"content\\\":\\\"\"}}]}}]}\n\n",
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"more and more \"}}]}}]}\n\n"
	case "line":
		return "data: {\"type\":\"content_block_delta\",\"text\":\"", "xxxxxxxxxxxxxxxx"
	case "event":
		return "event: content_block_delta\n", "data: xxxxxxxxxxxxxxxx\n"
	default: // error-body
		return "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"", "oops "
	}
}
