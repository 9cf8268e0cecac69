// Package llmtest serves recorded provider responses from local HTTP
// servers, for the tests of pkg/llm, the pg-llm CLI and the tools built on
// it. A fixture is an HTTP response as it went over the wire: a status line,
// headers, a blank line and the body (an SSE stream or an error document).
//
// Two headers steer the server and are not sent: X-Fake-Cut: 1 cuts the
// connection after the body (a stream cut off mid-way), and
// X-Fake-Delay-Ms: N waits before answering.
package llmtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Response is one parsed fixture.
type Response struct {
	Name   string
	Status int
	Header http.Header
	Body   []byte
	Cut    bool
	Delay  time.Duration
}

// Parse reads a fixture.
func Parse(name string, data []byte) (*Response, error) {
	// Fixtures are written with LF line ends; http.ReadResponse accepts them.
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), nil)
	if err != nil {
		return nil, fmt.Errorf("fixture %s: %w", name, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("fixture %s: %w", name, err)
	}
	r := &Response{Name: name, Status: resp.StatusCode, Header: resp.Header, Body: body}
	if resp.Header.Get("X-Fake-Cut") != "" {
		r.Cut = true
		resp.Header.Del("X-Fake-Cut")
	}
	if v := resp.Header.Get("X-Fake-Delay-Ms"); v != "" {
		ms, _ := strconv.Atoi(v)
		r.Delay = time.Duration(ms) * time.Millisecond
		resp.Header.Del("X-Fake-Delay-Ms")
	}
	resp.Header.Del("Content-Length")
	return r, nil
}

// Load reads fixture files.
func Load(paths ...string) ([]*Response, error) {
	var out []*Response
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		r, err := Parse(p, data)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Server answers the n-th request with the n-th response; when they run
// out it repeats the last one after SetRepeat(true), else answers 418.
type Server struct {
	*httptest.Server

	mu        sync.Mutex
	repeat    bool
	responses []*Response
	n         int
	requests  []Request
	conns     int
	forget    bool  // SetKeep(false)
	received  int64 // bytes of request bodies
}

// Request is what the server received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// NewServer starts a server over responses.
func NewServer(responses ...*Response) *Server {
	s := &Server{responses: responses}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Server.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.Start()
	return s
}

// Conns is the number of TCP connections the server accepted: a client
// that keeps its connections warm makes one for sequential requests.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// SetRepeat makes the server answer every request beyond the list with
// the last response.
func (s *Server) SetRepeat(on bool) {
	s.mu.Lock()
	s.repeat = on
	s.mu.Unlock()
}

// SetKeep(false) makes the server forget the requests it gets (they are
// kept by default, for Requests); BytesReceived still counts them.
func (s *Server) SetKeep(on bool) {
	s.mu.Lock()
	s.forget = !on
	s.mu.Unlock()
}

// BytesReceived is the size of the request bodies received so far.
func (s *Server) BytesReceived() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.received += int64(len(body))
	if !s.forget {
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	}
	var resp *Response
	switch {
	case s.n < len(s.responses):
		resp = s.responses[s.n]
	case s.repeat && len(s.responses) > 0:
		resp = s.responses[len(s.responses)-1]
	}
	s.n++
	s.mu.Unlock()
	if resp == nil {
		http.Error(w, "llmtest: no response left for this request", http.StatusTeapot)
		return
	}
	Write(w, r, resp)
}

// Write sends a response, flushing after every SSE event so the client
// sees a stream.
func Write(w http.ResponseWriter, r *http.Request, resp *Response) {
	if resp.Delay > 0 {
		select {
		case <-time.After(resp.Delay):
		case <-r.Context().Done():
			return
		}
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.Status)
	f, _ := w.(http.Flusher)
	rest := resp.Body
	for len(rest) > 0 {
		i := bytes.Index(rest, []byte("\n\n"))
		var chunk []byte
		if i < 0 {
			chunk, rest = rest, nil
		} else {
			chunk, rest = rest[:i+2], rest[i+2:]
		}
		if _, err := w.Write(chunk); err != nil {
			return
		}
		if f != nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			f.Flush()
		}
	}
	if resp.Cut {
		if f != nil {
			f.Flush()
		}
		panic(http.ErrAbortHandler) // drop the connection mid-stream
	}
}
