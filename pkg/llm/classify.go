package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// overflowPhrases are how providers say a request does not fit the model's
// context window. Anthropic: "prompt is too long: 208310 tokens > 200000
// maximum", "input length and `max_tokens` exceed context limit"; OpenAI
// and vLLM: code context_length_exceeded, "This model's maximum context
// length is 128000 tokens", "Your input exceeds the context window of this
// model"; llama.cpp server: type exceed_context_size_error, "the request
// exceeds the available context size"; Ollama: "prompt too long";
// OpenRouter: "maximum context length". Each phrase is specific to context
// length: a rate limit worded "too many tokens" must not match, because
// overflow is never retried.
var overflowPhrases = []string{
	"prompt is too long",
	"exceed context limit",
	"context_length_exceeded",
	"maximum context length",
	"exceed_context_size",
	"exceeds the available context size",
	"context size has been exceeded",
	"exceeds the context window",
	"prompt too long",
	"request_too_large",
}

func isOverflow(text string) bool {
	t := strings.ToLower(text)
	for _, p := range overflowPhrases {
		if strings.Contains(t, p) {
			return true
		}
	}
	return false
}

// classifyHTTP classifies an API error from its status (0 for an error
// event inside a 200 stream), the provider's error type (e.g.
// overloaded_error) and the body text.
//
// The status decides first: 400, 401, 403 and 404 are never retried
// whatever the body says, and the overflow wordings count only where an overflow
// can be reported (400, 413, or in the stream), so a 429 or 500 whose text
// happens to mention tokens is still retried.
func classifyHTTP(status int, errType, body string, header http.Header) *Error {
	e := &Error{Status: status}
	t := strings.ToLower(errType)
	switch {
	case status == 401 || status == 403:
		e.Kind = protocol.KindAuth
	case status == 400 || status == 413:
		switch {
		case status == 413 || isOverflow(body) || isOverflow(errType):
			e.Kind = protocol.KindContextOverflow
		case t == "authentication_error" || t == "permission_error":
			e.Kind = protocol.KindAuth
		default:
			e.Kind = protocol.KindBadRequest
		}
		// Never retryable: the same request gets the same answer.
		return e
	case status == 404:
		// An unknown model or endpoint, e.g. Ollama's "model not found,
		// try pulling it first", sent with type api_error. Another attempt
		// gets the same answer, but the next model of a chain may exist.
		e.Kind, e.nextModel = protocol.KindBadRequest, true
		return e
	case strings.Contains(t, "insufficient_quota"):
		e.Kind = protocol.KindRateLimit // out of credit: waiting does not help
	case strings.Contains(t, "overloaded") || status == 529 || status == 503:
		e.Kind, e.Retryable = protocol.KindOverloaded, true
	case strings.Contains(t, "rate_limit") || status == 429:
		e.Kind, e.Retryable = protocol.KindRateLimit, true
	case status == 0 && (isOverflow(body) || isOverflow(errType)):
		e.Kind = protocol.KindContextOverflow
	case t == "authentication_error" || t == "permission_error":
		e.Kind = protocol.KindAuth
	case t == "timeout_error" || status == 408 || status == 504:
		e.Kind, e.Retryable = protocol.KindTimeout, true
	case t == "api_error" || status >= 500 || status == 409:
		e.Kind, e.Retryable = protocol.KindServer, true
	default:
		e.Kind = protocol.KindBadRequest
	}
	// Some servers say so explicitly.
	if v := header.Get("x-should-retry"); v == "false" && e.Kind != protocol.KindRateLimit {
		e.Retryable = false
	}
	e.RetryAfter = retryAfter(header, time.Now())
	return e
}

// retryAfter reads retry-after-ms (milliseconds, OpenAI and Anthropic) or
// retry-after (seconds or an HTTP date).
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := strings.TrimSpace(h.Get("retry-after")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
			return time.Duration(s * float64(time.Second))
		}
		if t, err := http.ParseTime(v); err == nil {
			if d := t.Sub(now); d > 0 {
				return d
			}
		}
	}
	return 0
}

// classifyTransport classifies an error with no HTTP answer: the attempt's
// deadline, a refused or reset connection, a stream cut off.
func classifyTransport(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errAttemptTimeout) {
		return &Error{Kind: protocol.KindTimeout, Retryable: true, Message: "attempt timed out", Err: err}
	}
	if errors.Is(err, context.Canceled) {
		return &Error{Kind: protocol.KindNetwork, Message: "cancelled", Err: err}
	}
	kind := protocol.KindNetwork
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		kind = protocol.KindTimeout
	}
	msg := err.Error()
	switch {
	case errors.Is(err, ErrTruncated), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		msg = "stream cut off: " + msg
	case errors.Is(err, syscall.ECONNREFUSED):
		msg = "connection refused: " + msg
	}
	return &Error{Kind: kind, Retryable: true, Message: msg, Err: err}
}

// apiMessage extracts a readable message from an error body such as
// {"type":"error","error":{"type":"x","message":"y"}} or
// {"error":{"message":"y"}} or {"error":"y"}.
func apiMessage(status int, body string) string {
	b := strings.TrimSpace(body)
	msg := ""
	if i := strings.Index(b, `"message"`); i >= 0 {
		rest := b[i+len(`"message"`):]
		rest = strings.TrimLeft(rest, " :")
		msg = jsonString(firstJSONString(rest))
	} else if i := strings.Index(b, `"error"`); i >= 0 {
		rest := strings.TrimLeft(b[i+len(`"error"`):], " :")
		msg = jsonString(firstJSONString(rest))
	}
	if msg == "" {
		msg = b
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
	}
	if status > 0 {
		text := http.StatusText(status)
		switch {
		case status == 529:
			text = "Overloaded"
		case text == "":
			text = "Error"
		}
		return fmt.Sprintf("%d %s: %s", status, text, msg)
	}
	return msg
}

func jsonString(lit string) string {
	var s string
	if json.Unmarshal([]byte(lit), &s) != nil {
		return ""
	}
	return s
}

// firstJSONString returns the JSON string literal at the start of s.
func firstJSONString(s string) string {
	if !strings.HasPrefix(s, `"`) {
		return ""
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return s[:i+1]
		}
	}
	return ""
}
