package pgllm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/powerglide/powerglide/pkg/proc"
	"io"
	"os"
	"sync"
	"text/tabwriter"

	"github.com/itchyny/gojq"
	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/config"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/llm"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// eventWriter writes whole lines from many goroutines, held until Flush,
// so that the events a call emits from one read of the provider's stream
// leave in one write, and the client wakes once for them: the router
// flushes whenever a call is about to wait (llm.Router.OnWait), and every
// call and every error line ends with a flush. The first write that fails
// ends serving: it calls stop with the error, and nothing more is written.
type eventWriter struct {
	mu   sync.Mutex
	w    io.Writer
	buf  bytes.Buffer
	enc  *json.Encoder // into buf
	stop func(error)
	err  error
}

func newEventWriter(w io.Writer, stop func(error)) *eventWriter {
	l := &eventWriter{w: w, stop: stop}
	l.enc = jsonl.NewEncoder(&l.buf)
	return l
}

// Encode adds one line.
func (l *eventWriter) Encode(v any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	n := l.buf.Len()
	if err := l.enc.Encode(v); err != nil {
		l.buf.Truncate(n)
		l.fail(err)
	}
}

// Flush writes the lines added since the last flush.
func (l *eventWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || l.buf.Len() == 0 {
		return
	}
	_, err := l.w.Write(l.buf.Bytes())
	l.buf.Reset()
	if err != nil {
		l.fail(err)
	}
}

// fail is called with l.mu held.
func (l *eventWriter) fail(err error) {
	l.err = err
	l.stop(err)
}

func (l *eventWriter) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

type line struct {
	n    int
	data []byte
	err  error
}

// Run serves requests until the end of input.
func (s *ServeCmd) Run(rt *cli.Runtime, c *CLI) error {
	rt.JSON = true
	// A coprocess of pg-loop ends with it, even when pg-loop is killed.
	if err := proc.DieWithParentIfTied(rt.IO.Getenv); err != nil {
		return cli.Failf("serve", "%v", err)
	}
	if s.Concurrency < 1 {
		return cli.Usagef("--concurrency must be at least 1")
	}
	router, cfg, err := setup(rt, c)
	if err != nil {
		return err
	}
	if c.Replay != "" || cfg.Get("model").Source == config.SourceFlag {
		// The chain given on the command line serves every request: a
		// mistake in it is a usage error now, not one error per request.
		if err := checkModel(router, c, cfg, chooseModel(c, cfg, &protocol.Request{}), ""); err != nil {
			return err
		}
	}
	// Output that cannot be written ends serving: the calls in flight are
	// cancelled, no more requests are read, and the exit status is 1.
	ctx, stop := context.WithCancelCause(rt.Ctx)
	defer stop(nil)
	out := newEventWriter(rt.IO.Out, stop)
	router.OnWait(out.Flush)
	var rec *llm.Recorder
	if c.Record != "" {
		rec = &llm.Recorder{Path: c.Record}
	}

	// Lines are read apart so that a signal ends serving even while stdin
	// stays open; a pipe through the runtime's poller (cli.Pollable), as
	// serve waits on it between every two requests.
	in := cli.Pollable(rt.IO.In)
	if f, ok := in.(*os.File); ok && in != rt.IO.In {
		defer f.Close()
	}
	lines := make(chan line)
	go func() {
		defer close(lines)
		dec := jsonl.NewDecoder(in, "stdin")
		for {
			b, err := dec.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			l := line{n: dec.Line(), data: append([]byte(nil), b...), err: err}
			select {
			case lines <- l:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	var (
		held     llm.Held // conversations a request may continue (after)
		wg       sync.WaitGroup
		mu       sync.Mutex
		inflight = map[string]bool{}
		sem      = make(chan struct{}, s.Concurrency)
	)
	bad := func(n int, id string, err error) {
		out.Encode(&protocol.ErrorEvent{Type: protocol.EventError, ID: id, Tool: "pg-llm", Kind: protocol.KindBadRequest,
			Message: fmt.Sprintf("stdin:%d: %v", n, err), Line: n})
		out.Flush()
	}
loop:
	for {
		var l line
		var ok bool
		select {
		case l, ok = <-lines:
			if !ok {
				break loop
			}
		case <-ctx.Done():
			break loop
		}
		if l.err != nil {
			wg.Wait()
			return fmt.Errorf("read stdin: %w", l.err)
		}
		req, err := protocol.DecodeRequest(l.data)
		if err != nil {
			// Not a request: it may ask for the model table (a
			// model-list-request, docs/protocol.md), which a request line
			// never names as its type.
			if t, _ := protocol.TypeOf(l.data); t == "models" {
				ev, err := modelsEvent(router, l.data)
				if err != nil {
					bad(l.n, idOf(l.data), err)
					continue
				}
				out.Encode(ev)
				out.Flush()
				continue
			}
			bad(l.n, idOf(l.data), err)
			continue
		}
		if req.ID == "" {
			bad(l.n, "", protocol.FieldError{Field: "id", Msg: "is required in serve mode"})
			continue
		}
		if err := held.Expand(req); err != nil {
			var e *llm.Error
			errors.As(err, &e)
			out.Encode(e.Event(req.ID))
			out.Flush()
			continue
		}
		reqModel := req.Model
		req.Model = chooseModel(c, cfg, req)
		if err := checkModel(router, c, cfg, req.Model, reqModel); err != nil {
			var ce *cli.Error
			if errors.As(err, &ce) {
				err = ce.Err
			}
			bad(l.n, req.ID, err)
			continue
		}
		mu.Lock()
		dup := inflight[req.ID]
		if !dup {
			inflight[req.ID] = true
		}
		mu.Unlock()
		if dup {
			bad(l.n, req.ID, protocol.FieldError{Field: "id", Msg: fmt.Sprintf("%q is already in flight", req.ID)})
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break loop
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// The request's last event, its end or error, is written
			// only once the call is recorded and its id is free again:
			// another call's flush would otherwise show the end to the
			// client, which may then reuse the id while it is still in
			// flight, or see the recording's failure after the end.
			var events []any
			var last any
			sink := func(ev any) {
				switch ev.(type) {
				case *protocol.EndEvent, *protocol.ErrorEvent:
					last = ev
				}
				if rec != nil {
					events = append(events, ev)
				}
				if ev != last {
					out.Encode(ev)
				}
			}
			_, err := router.Call(ctx, req, sink)
			if rec != nil && (err == nil || isLLMError(err)) {
				if rerr := rec.Record(req, events); rerr != nil {
					if err == nil {
						// As one-shot pg-llm fails when it cannot record.
						last = &protocol.ErrorEvent{Type: protocol.EventError, ID: req.ID, Tool: "pg-llm", Message: rerr.Error()}
					} else {
						fmt.Fprintf(rt.IO.Err, "pg-llm: warning: %v\n", rerr)
					}
				}
			}
			if end, ok := last.(*protocol.EndEvent); ok {
				// Held only when the end goes out (a call that could not
				// be recorded ends with an error, and holding its
				// conversation would push out one the client can
				// continue), and before the client can see it.
				held.Hold(req, end)
			}
			mu.Lock()
			delete(inflight, req.ID)
			mu.Unlock()
			if last != nil {
				out.Encode(last)
			}
			out.Flush()
		}()
	}
	wg.Wait()
	if err := out.failed(); err != nil {
		return err
	}
	return rt.Ctx.Err()
}

// modelsEvent answers a model-list-request with the model table, as
// `pg-llm models --json` prints it.
func modelsEvent(router *llm.Router, line []byte) (*protocol.ModelsEvent, error) {
	var req protocol.ModelListRequest
	if err := jsonl.Unmarshal(line, &req, true); err != nil {
		return nil, err
	}
	if req.ID == "" {
		return nil, protocol.FieldError{Field: "id", Msg: "is required in serve mode"}
	}
	return &protocol.ModelsEvent{Type: "models", ID: req.ID, Models: router.Models().All()}, nil
}

// idOf finds the id of a line that is not a valid request, when it has one.
func idOf(b []byte) string {
	var v struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	s, _ := v.ID.(string)
	return s
}

// Run prints the model table.
func (m *ModelsCmd) Run(rt *cli.Runtime, c *CLI) error {
	rt.JSON = rt.IO.JSON(m.JSON || m.Jq != "")
	var query *gojq.Code
	if m.Jq != "" {
		q, err := gojq.Parse(m.Jq)
		if err != nil {
			return cli.Usagef("--jq: %v", err)
		}
		if query, err = gojq.Compile(q); err != nil {
			return cli.Usagef("--jq: %v", err)
		}
	}
	router, _, err := setup(rt, c)
	if err != nil {
		return err
	}
	models := router.Models().All()
	if rt.JSON {
		enc := jsonl.NewEncoder(rt.IO.Out)
		for _, info := range models {
			if query == nil {
				if err := enc.Encode(info); err != nil {
					return err
				}
				continue
			}
			var v any
			b, _ := json.Marshal(info)
			_ = json.Unmarshal(b, &v)
			iter := query.RunWithContext(rt.Ctx, v)
			for {
				out, ok := iter.Next()
				if !ok {
					break
				}
				if err, isErr := out.(error); isErr {
					return cli.Failf("jq", "--jq: %v", err)
				}
				if err := enc.Encode(out); err != nil {
					return err
				}
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(rt.IO.Out, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "MODEL\tCONTEXT\tIN $/MTOK\tOUT $/MTOK\tCACHE READ\tCACHE WRITE\tSOURCE\t")
	for _, i := range models {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", i.ID, i.ContextWindow, price(i.InputPerMTok), price(i.OutputPerMTok),
			price(i.CacheReadPerMTok), price(i.CacheWritePerMTok), i.Source)
	}
	return tw.Flush()
}

func price(p float64) string {
	if p == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3g", p)
}
