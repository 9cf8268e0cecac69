package loop

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// Markers are the last stdout line of a run.
const (
	MarkerDone  = "<POWERGLIDE_DONE>"
	MarkerError = "<POWERGLIDE_ERROR>"
)

// Emitter writes loop events: JSON Lines, or a readable line each on a
// terminal.
//
// The events of a burst (a step emits seven, in two bursts) leave in one
// write: Emit buffers whole lines and starts a goroutine that writes them,
// which on pg-loop's one processor runs once the emitting goroutine waits
// (for the model, a tool, a person), so a reader following the output
// (tail -f, pg-dash) sees them then, in order, each line whole. Marker,
// Flush and Err write what is buffered first.
type Emitter struct {
	mu      sync.Mutex
	w       io.Writer
	text    bool
	err     error
	observe func(any)
	buf     []byte // whole lines not yet written
	pending bool   // a goroutine will write buf
	// later runs the write of a burst: in a goroutine of its own (tests
	// run it when they choose, as the scheduler would once the emitting
	// goroutine waits).
	later func(write func())
}

// maxBuffered is what Emit buffers at most: beyond it, it writes at once.
const maxBuffered = 64 << 10

// Observe has f see every event emitted from now on (before it is
// written, outside the emitter's lock).
func (e *Emitter) Observe(f func(any)) {
	e.mu.Lock()
	e.observe = f
	e.mu.Unlock()
}

// NewEmitter writes to w; text selects the readable form.
func NewEmitter(w io.Writer, text bool) *Emitter {
	return &Emitter{w: w, text: text, later: func(write func()) { go write() }}
}

// Emit writes one event, secrets redacted (a worker's stdout is its log
// file). Write errors are kept and returned by Err.
func (e *Emitter) Emit(ev any) {
	e.mu.Lock()
	observe := e.observe
	e.mu.Unlock()
	if observe != nil {
		observe(ev)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var b []byte
	if e.text {
		b = []byte(Render(ev) + "\n")
	} else {
		var err error
		if b, err = jsonl.Marshal(ev); err != nil {
			e.err = err
			return
		}
	}
	e.buf = append(e.buf, secrets.Redact(b)...)
	switch {
	case len(e.buf) >= maxBuffered:
		e.write()
	case !e.pending:
		e.pending = true
		e.later(func() { _ = e.Flush() })
	}
}

// Flush writes the buffered events and returns the first write error.
func (e *Emitter) Flush() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending = false
	e.write()
	return e.err
}

// write writes buf; e.mu is held.
func (e *Emitter) write() {
	if len(e.buf) == 0 {
		return
	}
	if _, err := e.w.Write(e.buf); err != nil && e.err == nil {
		e.err = err
	}
	if cap(e.buf) > maxBuffered {
		e.buf = nil // one big event: its buffer goes
	} else {
		e.buf = e.buf[:0]
	}
}

// Text reports whether the events are written in the readable form.
func (e *Emitter) Text() bool { return e.text }

// Marker writes a final marker line, after the buffered events.
func (e *Emitter) Marker(m string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.buf = append(append(e.buf, m...), '\n')
	e.write()
}

// Err writes the buffered events and returns the first write error.
func (e *Emitter) Err() error { return e.Flush() }

// Render is the readable form of an event, for a terminal: control
// characters in the model's text, tool output or a task title are shown,
// not obeyed.
func Render(ev any) string { return termtext.Visible(render(ev)) }

func render(ev any) string {
	switch e := ev.(type) {
	case *protocol.LoopStateEvent:
		s := fmt.Sprintf("%s [%d] %-10s → %s", e.TS.Format("15:04:05"), e.Step, e.From, e.To)
		if e.Reason != "" {
			s += "  (" + e.Reason + ")"
		}
		return s
	case *protocol.LoopAssistantEvent:
		return fmt.Sprintf("%s [%d] assistant: %s  (%d in / %d out, $%.4f total)", e.TS.Format("15:04:05"), e.Step, termtext.OneLine(e.Text, 200), e.Usage.InputTokens, e.Usage.OutputTokens, e.Total.CostUSD)
	case *protocol.LoopToolCallEvent:
		return fmt.Sprintf("%s [%d] → %s %s", e.TS.Format("15:04:05"), e.Step, e.Call.Name, termtext.OneLine(string(e.Call.Input), 160))
	case *protocol.LoopToolResultEvent:
		st := "ok"
		if !e.Result.OK {
			st = "FAILED"
			if e.Result.Error != nil {
				st += ": " + termtext.OneLine(*e.Result.Error, 120)
			}
		}
		return fmt.Sprintf("%s [%d] ← %s %s (%d ms) %s", e.TS.Format("15:04:05"), e.Step, e.Result.Name, st, e.Result.DurationMS, termtext.OneLine(e.Result.Output, 120))
	case *protocol.LoopVerifyEvent:
		st := "passed"
		if !e.OK {
			st = fmt.Sprintf("failed (exit %d)", e.ExitCode)
		}
		return fmt.Sprintf("%s [%d] verify #%d %q %s %s", e.TS.Format("15:04:05"), e.Step, e.Attempt, e.Command, st, termtext.OneLine(e.Output, 160))
	case *protocol.LoopCommitEvent:
		if e.Skipped {
			return fmt.Sprintf("%s commit skipped: nothing changed", e.TS.Format("15:04:05"))
		}
		return fmt.Sprintf("%s commit %s %s", e.TS.Format("15:04:05"), e.Hash, termtext.OneLine(e.Message, 100))
	case *protocol.LoopLimitEvent:
		return fmt.Sprintf("%s [%d] LIMIT %s: %s", e.TS.Format("15:04:05"), e.Step, e.Limit, e.Reason)
	case *protocol.LoopTaskEvent:
		s := fmt.Sprintf("%s task %s %s", e.TS.Format("15:04:05"), e.Task, e.Status)
		if e.Title != "" {
			s += ": " + termtext.OneLine(e.Title, 100)
		}
		if e.Reason != "" {
			s += " (" + e.Reason + ")"
		}
		return s
	case *protocol.LoopLogEvent:
		return fmt.Sprintf("%s %s: %s", e.TS.Format("15:04:05"), e.Level, e.Message)
	case *protocol.LoopSummaryEvent:
		s := fmt.Sprintf("%s summary: %s; tasks %d done, %d failed, %d cancelled, %d released; %d steps; %d in / %d out tokens (%d cache read, %d cache write), $%.4f; %.1fs wall: model %.1fs, tools %.1fs, verify %.1fs, waiting %.1fs, harness %.1fs",
			e.TS.Format("15:04:05"), e.Outcome, e.Tasks.Done, e.Tasks.Failed, e.Tasks.Cancelled, e.Tasks.Released, e.Steps,
			e.Usage.InputTokens, e.Usage.OutputTokens, e.Usage.CacheReadTokens, e.Usage.CacheWriteTokens, e.Usage.CostUSD,
			secs(e.WallMS), secs(e.ModelMS), secs(e.ToolsMS), secs(e.VerifyMS), secs(e.WaitMS), secs(e.HarnessMS))
		if e.Reason != "" {
			s += " (" + termtext.OneLine(e.Reason, 200) + ")"
		}
		return s
	case *protocol.LoopGuardEvent:
		return fmt.Sprintf("%s [%d] GUARD %s %s %s (first seen in untrusted output of %s)", e.TS.Format("15:04:05"), e.Step, e.Action, e.Kind, termtext.OneLine(e.Match, 120), e.Source)
	}
	b, _ := jsonl.Marshal(ev)
	return strings.TrimSpace(string(b))
}

func secs(ms int64) float64 { return float64(ms) / 1000 }
