package llm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// The SDKs build, sign and send requests and turn error statuses into
// typed errors; the event stream of a successful answer is decoded here.
// Decoding every event through the SDKs' generic union types measured at
// about 20 MB/s of SSE (pprof: most of it in apijson and map building);
// these small structs with encoding/json do several times better, and the
// stream is the hot path of every call.

// bodyTap is a middleware that takes the body of a successful response
// away from the SDK, which then sees an empty stream.
type bodyTap struct {
	mu   sync.Mutex
	body io.ReadCloser
}

func (t *bodyTap) middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	resp, err := next(req)
	switch {
	case err != nil:
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		t.mu.Lock()
		t.body = resp.Body
		t.mu.Unlock()
		resp.Body = http.NoBody
	default:
		// The SDK reads an error's body whole: a server that never ends it
		// must not take all the memory.
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, maxErrorBody), resp.Body}
	}
	return resp, err
}

// maxErrorBody is as much of an error response's body as is read; error
// bodies are a few hundred bytes.
const maxErrorBody = 1 << 20

func (t *bodyTap) take() io.ReadCloser {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.body
	t.body = nil
	return b
}

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

// sseReader splits a text/event-stream into events. No line and no event
// may grow past max bytes: a server that sends one endless line, or data
// lines without the blank line that ends an event, gets an error of kind
// response_too_large instead of all the memory.
type sseReader struct {
	r     *bufio.Reader
	max   int
	event []byte
	data  bytes.Buffer
	long  []byte
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 32<<10), max: max}
}

// line returns the next line without its line end.
func (s *sseReader) line() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.long = append(s.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(s.long) > s.max {
				return nil, tooLarge("a line of its event stream", s.max)
			}
			line, err = s.r.ReadSlice('\n')
			s.long = append(s.long, line...)
		}
		line = s.long
	}
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, nil
}

// Next returns the next event's name and data (lines joined by \n), both
// valid until the next call. At the end of the stream it returns
// io.EOF; an event not closed by a blank line is dropped, as the SSE spec
// says, and the stream counts as cut off (io.ErrUnexpectedEOF).
func (s *sseReader) Next() (event, data []byte, err error) {
	s.event = s.event[:0]
	s.data.Reset()
	hasData := false
	for {
		line, err := s.line()
		if err != nil {
			if errors.Is(err, io.EOF) && (hasData || len(s.event) > 0) {
				return nil, nil, io.ErrUnexpectedEOF
			}
			return nil, nil, err
		}
		if len(line) == 0 {
			if !hasData && len(s.event) == 0 {
				continue
			}
			return s.event, s.data.Bytes(), nil
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(name) {
		case "event":
			s.event = append(s.event, value...)
		case "data":
			if hasData {
				s.data.WriteByte('\n')
			}
			s.data.Write(value)
			hasData = true
		}
		if s.data.Len()+len(s.event) > s.max {
			return nil, nil, tooLarge("an event of its stream", s.max)
		}
	}
}
