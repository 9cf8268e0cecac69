package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

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
	dec := jsonl.NewDecoder(r, "stdin")
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		line, err := dec.Next()
		if errors.Is(err, io.EOF) {
			wg.Wait()
			return werrOf(&wmu, &werr)
		}
		if err != nil {
			return fmt.Errorf("read calls: %w", err)
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		var call protocol.ToolCall
		if err := jsonl.Unmarshal(line, &call, true); err != nil {
			emit(protocol.ErrorEvent{Type: protocol.EventError, Tool: "pg-tool", Kind: "bad_input", Line: dec.Line(), Message: fmt.Sprintf("line %d: %v", dec.Line(), err)})
			continue
		}
		if call.Name == "" {
			emit(protocol.ErrorEvent{Type: protocol.EventError, ID: call.ID, Tool: "pg-tool", Kind: "bad_input", Line: dec.Line(), Message: fmt.Sprintf("line %d: missing field \"name\" (want {\"id\",\"name\",\"input\"})", dec.Line())})
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
			wg.Wait() // keep results in input order
		}
		if err := werrOf(&wmu, &werr); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
	}
}

func werrOf(mu *sync.Mutex, err *error) error {
	mu.Lock()
	defer mu.Unlock()
	return *err
}
