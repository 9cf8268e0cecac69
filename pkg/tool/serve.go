package tool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// Serve reads calls as JSON lines from r and writes one result line per
// call to w, tagged with the call's id. A malformed line yields an error
// record naming the line and the stream goes on. Up to parallel calls run
// at once (results may then come out of order). Serve returns at the end
// of the input, after the calls in flight are done.
func (s *Session) Serve(ctx context.Context, r io.Reader, w io.Writer, parallel int) error {
	if parallel < 1 {
		parallel = 1
	}
	var wmu sync.Mutex
	enc := jsonl.NewEncoder(w)
	var werr error
	emit := func(v any) {
		wmu.Lock()
		defer wmu.Unlock()
		if werr == nil {
			werr = enc.Encode(v)
		}
	}
	// Lines are read in their own goroutine so a cancelled context (SIGINT,
	// SIGTERM) ends the loop even while stdin stays open.
	type item struct {
		line []byte
		no   int
		err  error
	}
	lines := make(chan item)
	go func() {
		dec := jsonl.NewDecoder(r, "stdin")
		for {
			line, err := dec.Next()
			it := item{line: bytes.Clone(line), no: dec.Line(), err: err}
			select {
			case lines <- it:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	// Cancelled (SIGTERM, SIGINT): calls in flight see the context and end;
	// one that does not is left behind after a grace period, so the process
	// still exits promptly.
	defer waitAtMost(&wg, ctx, serveGrace)
	for {
		var it item
		select {
		case it = <-lines:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		line, err := it.line, it.err
		if errors.Is(err, io.EOF) {
			waitAtMost(&wg, ctx, serveGrace)
			return werrOf(&wmu, &werr)
		}
		if err != nil {
			return fmt.Errorf("read calls: %w", err)
		}
		if t, _ := protocol.TypeOf(line); t == "list" {
			var req protocol.ToolListRequest
			if err := jsonl.Unmarshal(line, &req, true); err != nil {
				emit(protocol.ErrorEvent{Type: protocol.EventError, Tool: "pg-tool", Kind: "bad_input", Line: it.no, Message: fmt.Sprintf("line %d: %v", it.no, err)})
				continue
			}
			emit(s.listEvent(ctx, req.ID))
			continue
		}
		var call protocol.ToolCall
		if err := jsonl.Unmarshal(line, &call, true); err != nil {
			emit(protocol.ErrorEvent{Type: protocol.EventError, Tool: "pg-tool", Kind: "bad_input", Line: it.no, Message: fmt.Sprintf("line %d: %v", it.no, err)})
			continue
		}
		if call.Name == "" {
			emit(protocol.ErrorEvent{Type: protocol.EventError, ID: call.ID, Tool: "pg-tool", Kind: "bad_input", Line: it.no, Message: fmt.Sprintf("line %d: missing field \"name\" (want {\"id\",\"name\",\"input\"})", it.no)})
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			emit(s.Call(ctx, call).ToolResult)
		}()
		if parallel == 1 {
			waitAtMost(&wg, ctx, serveGrace) // keep results in input order
		}
		if err := werrOf(&wmu, &werr); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
	}
}

// listEvent answers a list request: the definitions pg-tool list prints.
func (s *Session) listEvent(ctx context.Context, id string) protocol.ToolsEvent {
	tools, err := s.Tools(ctx)
	ev := protocol.ToolsEvent{Type: "tools", ID: id, Tools: make([]protocol.ToolDef, 0, len(tools))}
	for _, t := range tools {
		ev.Tools = append(ev.Tools, t.Def())
	}
	if err != nil {
		msg := err.Error()
		ev.Error = &msg
	}
	return ev
}

// serveGrace is how long a cancelled Serve waits for calls in flight.
const serveGrace = 2 * time.Second

// waitAtMost waits for wg; once ctx is done, for at most grace more.
func waitAtMost(wg *sync.WaitGroup, ctx context.Context, grace time.Duration) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	select {
	case <-done:
	case <-time.After(grace):
	}
}

func werrOf(mu *sync.Mutex, err *error) error {
	mu.Lock()
	defer mu.Unlock()
	return *err
}
