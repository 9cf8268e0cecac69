package dash

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// streamReader reads one loop's event stream (pg-loop's stdout) in a
// goroutine of its own, so the UI never waits on the pipe.
type streamReader struct {
	ch  chan []byte
	err chan error // the read error, sent once the stream ends; nil at EOF
}

func startStream(r io.Reader) *streamReader {
	s := &streamReader{ch: make(chan []byte, 4096), err: make(chan error, 1)}
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				s.ch <- line
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				s.err <- err
				close(s.ch)
				return
			}
		}
	}()
	return s
}

// streamMsg carries the lines that arrived since the last one.
type streamMsg struct {
	entries []*Entry
	invalid []string
	eof     bool
	err     error
}

// maxStreamBatch caps the lines handled per message so the UI keeps
// drawing during a flood.
const maxStreamBatch = 2000

// next waits for at least one line, then takes what else is there.
func (s *streamReader) next() func() streamMsg {
	return func() streamMsg {
		var m streamMsg
		add := func(line []byte) {
			e, err := DecodeEntry(trimEOL(line))
			if err != nil {
				if len(trimEOL(line)) > 0 {
					m.invalid = append(m.invalid, err.Error())
				}
				return
			}
			m.entries = append(m.entries, e)
		}
		line, ok := <-s.ch
		if !ok {
			m.eof, m.err = true, <-s.err
			return m
		}
		add(line)
		for n := 1; n < maxStreamBatch; n++ {
			select {
			case line, ok := <-s.ch:
				if !ok {
					m.eof, m.err = true, <-s.err
					return m
				}
				add(line)
			default:
				return m
			}
		}
		return m
	}
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// StreamState builds a one-worker snapshot from a loop's events.
type StreamState struct {
	Worker WorkerInfo
	Tasks  []protocol.Task
	Ended  string // "", "done" or "error" after a <POWERGLIDE_*> signal
}

// NewStreamState starts an empty stream snapshot.
func NewStreamState() *StreamState {
	return &StreamState{Worker: WorkerInfo{Worker: protocol.Worker{Worker: "stdin", State: "idle", Velocity: 1}}}
}

// Apply folds one entry into the state.
func (st *StreamState) Apply(e *Entry) {
	w := &st.Worker.Worker
	if !e.TS.IsZero() {
		if w.StartedAt.IsZero() {
			w.StartedAt = e.TS
		}
		w.HeartbeatAt = e.TS
	}
	switch ev := e.Ev.(type) {
	case *protocol.LoopStateEvent:
		w.State = ev.To
		if ev.Worker != "" {
			w.Worker = ev.Worker
		}
		if ev.Session != "" {
			w.Session = ev.Session
		}
		if ev.Task != "" {
			w.Task = ev.Task
		}
		if ev.Step > 0 {
			w.Step = ev.Step
		}
		w.ProgressAt = ev.TS
	case *protocol.LoopAssistantEvent:
		w.Usage = ev.Total
		if ev.Step > 0 {
			w.Step = ev.Step
		}
	case *protocol.LoopToolCallEvent:
		w.LastTool = ev.Call.Name
	case *protocol.LoopTaskEvent:
		t := st.task(ev.Task)
		if ev.Title != "" {
			t.Title = ev.Title
		}
		switch ev.Status {
		case "started":
			t.Status = protocol.StatusClaimed
			t.Attempts++
			t.Claim = &protocol.Claim{} // its worker is named in Snapshot
			w.Task = ev.Task
		case "done":
			t.Status = protocol.StatusDone
		case "failed":
			t.Status = protocol.StatusFailed
			if ev.Reason != "" {
				r := ev.Reason
				t.Error = &r
			}
		case "released":
			t.Status = protocol.StatusPending
		}
		t.UpdatedAt = ev.TS
		if t.CreatedAt.IsZero() {
			t.CreatedAt = ev.TS
		}
	case *protocol.ErrorEvent:
		msg := ev.Message
		w.LastError = &msg
	}
	switch {
	case e.Kind == KindSignal && e.Tone == "ok":
		st.Ended, w.State = "done", "done"
	case e.Kind == KindSignal:
		st.Ended, w.State = "error", "failed"
	}
}

func (st *StreamState) task(id string) *protocol.Task {
	for i := range st.Tasks {
		if st.Tasks[i].ID == id {
			return &st.Tasks[i]
		}
	}
	st.Tasks = append(st.Tasks, protocol.Task{ID: id, Status: protocol.StatusPending, DependsOn: []string{}})
	return &st.Tasks[len(st.Tasks)-1]
}

// Snapshot renders the stream state as a one-worker team.
func (st *StreamState) Snapshot() Snapshot {
	tasks := append([]protocol.Task(nil), st.Tasks...)
	for i := range tasks {
		if tasks[i].Claim != nil {
			tasks[i].Claim = &protocol.Claim{Worker: st.Worker.Worker.Worker}
		}
	}
	return Snapshot{
		Team:        "stdin",
		Tasks:       tasks,
		Workers:     []WorkerInfo{st.Worker},
		QueueExists: true,
		DirExists:   true,
		Started:     st.Worker.StartedAt,
	}
}

// StreamInfo sums up a stream read whole.
type StreamInfo struct {
	Record   StreamRecord
	Warnings []string
}

// ReadStream reads a loop's event stream to its end (pg-dash - --once).
// Invalid lines are counted and reported, not fatal.
func ReadStream(r io.Reader) (Snapshot, []*Entry, StreamInfo, error) {
	st := NewStreamState()
	var es []*Entry
	var info StreamInfo
	br := bufio.NewReaderSize(r, 64<<10)
	n := 0
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			n++
		}
		if t := trimEOL(line); len(bytes.TrimSpace(t)) > 0 {
			e, derr := DecodeEntry(t)
			if derr != nil {
				info.Record.Invalid++
				info.Warnings = append(info.Warnings, fmt.Sprintf("stdin:%d: %v", n, derr))
			} else {
				st.Apply(e)
				es = append(es, e)
				if len(es) > maxEntries {
					es = append([]*Entry(nil), es[len(es)-maxEntries/2:]...)
				}
				info.Record.Events++
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return Snapshot{}, nil, info, err
		}
	}
	info.Record.Ended = st.Ended
	return st.Snapshot(), es, info, nil
}
