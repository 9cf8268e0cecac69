// Package llm makes model calls and streams them as powerglide model events
// (DESIGN.md §4, pg-llm): providers for Anthropic, OpenAI, OpenAI-compatible
// servers and recorded sessions (replay), behind a router that owns the
// retry policy, the per-attempt and overall timeouts and the fallback chain.
//
// A Provider streams one attempt of one call through an *Emitter and
// returns the end of the call or an *Error that says whether the failure is
// worth retrying. The Router turns attempts into a call: retry and fallback
// events, usage with cost, and the final end or error event.
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// Provider streams one attempt of a model call.
type Provider interface {
	// Stream sends req to model and reports the answer through em as it
	// arrives: start, text, thinking and complete tool_call events. It
	// returns the end of the call (stop reason, assistant message, usage
	// without cost) or an error, preferably an *Error.
	Stream(ctx context.Context, model string, req *protocol.Request, em *Emitter) (*protocol.EndEvent, error)
}

// Emitter hands a call's events to a sink, tagged with the request id.
// It remembers whether any content (text, thinking, tool calls) went out,
// because an attempt that already showed content cannot be retried without
// the consumer seeing it twice.
type Emitter struct {
	ID    string
	Model string // the model id as the user wrote it, provider/model
	sink  func(any)

	content bool
	max     int    // what one response may hold; 0 means MaxResponseBytes
	held    int    // what this attempt's response holds so far
	wait    func() // see Router.OnWait; nil: nothing
	// broken is the usage a failed attempt's stream reported before it
	// broke (message_start's input tokens): what the provider charges for
	// the attempt, which the router adds to the call's usage.
	broken protocol.Usage
}

// brokenUsage records what a failed attempt's stream had reported.
func (e *Emitter) brokenUsage(u protocol.Usage) { e.broken = u }

// takeBroken returns and forgets the usage a failed attempt reported.
func (e *Emitter) takeBroken() protocol.Usage {
	u := e.broken
	e.broken = protocol.Usage{}
	return u
}

// MaxResponseBytes bounds what one response may hold in memory: its text,
// thinking, signatures and tool input together, and any single line or
// event of its stream. An answer past it ends the call with an error of
// kind response_too_large instead of growing without end (a server that
// never ends its stream). 32 MiB is some hundred times the longest answer
// a model writes today.
const MaxResponseBytes = 32 << 20

// limit is the bound in force.
func (e *Emitter) limit() int {
	if e.max > 0 {
		return e.max
	}
	return MaxResponseBytes
}

// hold counts n more bytes of the response being assembled and fails once
// they pass the limit.
func (e *Emitter) hold(n int) error {
	e.held += n
	if e.held > e.limit() {
		return tooLarge("its text, thinking and tool input", e.limit())
	}
	return nil
}

// tooLarge reports a response that passed the limit.
func tooLarge(what string, limit int) *Error {
	return &Error{Kind: protocol.KindResponseTooLarge,
		Message: fmt.Sprintf("response too large: %s passed the limit of %s for one answer", what, byteSize(limit))}
}

func byteSize(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// NewEmitter returns an emitter that passes events to sink.
func NewEmitter(id string, sink func(any)) *Emitter {
	if sink == nil {
		sink = func(any) {}
	}
	return &Emitter{ID: id, sink: sink}
}

// Emit passes a ready event on.
func (e *Emitter) Emit(ev any) { e.sink(ev) }

// waiting says the call is about to wait (for the network, or before a
// retry): see Router.OnWait.
func (e *Emitter) waiting() {
	if e.wait != nil {
		e.wait()
	}
}

// Content reports whether content events went out.
func (e *Emitter) Content() bool { return e.content }

// Start opens an attempt's stream.
func (e *Emitter) Start(provider, model, requestID string) {
	e.sink(&protocol.StartEvent{Type: protocol.EventStart, ID: e.ID, Provider: provider, Model: model, RequestID: requestID})
}

// Text sends a text delta.
func (e *Emitter) Text(s string) {
	if s == "" {
		return
	}
	e.content = true
	e.sink(&protocol.TextEvent{Type: protocol.EventText, ID: e.ID, Text: s})
}

// Thinking sends a thinking delta.
func (e *Emitter) Thinking(s string) {
	if s == "" {
		return
	}
	e.content = true
	e.sink(&protocol.ThinkingEvent{Type: protocol.EventThinking, ID: e.ID, Text: s})
}

// ToolCall sends a complete tool call.
func (e *Emitter) ToolCall(c protocol.ToolCall) {
	e.content = true
	e.sink(&protocol.ToolCallEvent{Type: protocol.EventToolCall, ID: e.ID, Call: c})
}

// Error is a classified failure of a model call.
type Error struct {
	Kind       string // protocol.Kind*
	Status     int    // HTTP status, 0 when there was none
	Retryable  bool
	Message    string
	RetryAfter time.Duration // what the server asked for, 0 when it did not
	Model      string
	Err        error
	// Usage is what the call's failed attempts were charged (streams cut
	// after the provider counted the input), priced when the model is.
	Usage protocol.Usage

	noRetry   bool // a replayed failure: report it as recorded, never retry
	nextModel bool // not worth retrying, but the next model of a chain may answer (404)
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// Event returns the error as a model event.
func (e *Error) Event(id string) *protocol.ErrorEvent {
	ev := &protocol.ErrorEvent{Type: protocol.EventError, ID: id, Tool: "pg-llm", Kind: e.Kind,
		Message: e.Message, Retryable: e.Retryable, Status: e.Status, Model: e.Model}
	if e.Usage != (protocol.Usage{}) {
		u := e.Usage
		ev.Usage = &u
	}
	return ev
}

// badStream reports a stream that breaks its provider's protocol: an event
// that is not JSON, blocks out of order, a tool call without an id or a
// name. It is the server's fault (kind server), and retryable: another
// attempt, or the next model of the chain, may well answer properly, and
// the router retries only while no content has gone out, so the consumer
// never sees a message twice.
func badStream(format string, args ...any) *Error {
	return &Error{Kind: protocol.KindServer, Retryable: true, Message: fmt.Sprintf(format, args...)}
}

// badUsage reports a server that counts a usage no call has: negative
// tokens, a cost that is not a number. Kind server, and not retryable: the
// answer may have streamed already, asking again spends more on a broken
// server, and a call whose cost cannot be known must not count as made
// (summed into totals, it would evade every budget).
func badUsage(err error) *Error {
	return &Error{Kind: protocol.KindServer, Message: fmt.Sprintf("the server reported a usage no call has, %v: the call is refused, not retried", err), Err: err}
}

// ErrTruncated is the cause of a stream that ended before its last event.
var ErrTruncated = fmt.Errorf("stream ended before the end of the message")

// defaultsFor fills in the values a request may leave out.
func withDefaults(req *protocol.Request, maxTokens int) *protocol.Request {
	r := *req
	if r.MaxTokens <= 0 {
		r.MaxTokens = maxTokens
	}
	if r.MaxTokens <= 0 {
		r.MaxTokens = 8192
	}
	if r.Thinking != nil && r.Thinking.BudgetTokens > 0 && r.MaxTokens <= r.Thinking.BudgetTokens {
		// The API needs room for the answer after the thinking.
		r.MaxTokens = r.Thinking.BudgetTokens + maxTokens
	}
	return &r
}

// parseInput turns assembled tool input JSON into a raw object; an empty
// input is {}.
func parseInput(s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage("{}"), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		return nil, fmt.Errorf("tool input is not valid JSON: %.200s", s)
	}
	if buf.Bytes()[0] != '{' {
		return nil, fmt.Errorf("tool input is not a JSON object: %.200s", s)
	}
	return json.RawMessage(buf.Bytes()), nil
}

// SplitModel splits provider/model at the first slash.
func SplitModel(id string) (provider, model string, ok bool) {
	provider, model, ok = strings.Cut(strings.TrimSpace(id), "/")
	if !ok || provider == "" || model == "" {
		return "", "", false
	}
	return provider, model, true
}

// Chain splits a fallback chain a,b,c.
func Chain(model string) []string {
	var out []string
	for _, m := range strings.Split(model, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}
