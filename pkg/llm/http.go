package llm

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// Requests go out and answers come back through net/http alone. The
// providers' SDKs were tried both ways (docs/llm.md, "Streams"): decoding
// every event through their generic union types measured about 20 MB/s of
// SSE, and building each request through their parameter structs
// (reflection over the whole conversation, every call) took a quarter of
// pg-llm serve's CPU in a 200-step run. The wire formats used here are a
// few documented JSON shapes; the bodies are built from small structs
// (with each message's encoding cached, encoding.go), the streams decoded
// by the small decoders in anthropic.go and openai.go, and error responses
// classified by classify.go from their status, type and text.

// post sends body as JSON and returns the response of a 2xx status. Any
// other status is read (at most maxErrorBody bytes) and handed to
// classify; a failure with no HTTP answer is returned as it is, for
// classifyTransport.
func post(ctx context.Context, hc *http.Client, url string, header http.Header, body []byte,
	classify func(status int, body []byte, h http.Header) *Error) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, &Error{Kind: protocol.KindBadRequest, Message: err.Error(), Err: err}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	// A server that never ends an error body must not take all the memory.
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil && len(raw) == 0 {
		return nil, err
	}
	return nil, classify(resp.StatusCode, raw, resp.Header)
}

// maxErrorBody is as much of an error response's body as is read; error
// bodies are a few hundred bytes.
const maxErrorBody = 1 << 20

// A stream's last event is normally followed only by the end of the
// chunked encoding; finishBody reads up to drainMax bytes of whatever
// follows, for at most drainWait.
const (
	drainMax  = 64 << 10
	drainWait = time.Second
)

// finishBody drains what is left of a response body after the stream's
// last event, then closes it. Go's transport reuses a connection only when
// its body was read to the end: closed earlier, the connection is closed,
// and serve mode would open a new one for every request. A server that
// keeps the stream open is cut off after drainWait by cancel, which ends
// the request (and that connection).
func finishBody(body io.ReadCloser, cancel context.CancelFunc) {
	t := time.AfterFunc(drainWait, cancel)
	_, _ = io.CopyN(io.Discard, body, drainMax)
	t.Stop()
	body.Close()
}
