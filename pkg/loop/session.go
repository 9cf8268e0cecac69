package loop

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// Session files.
const (
	SessionFile = "session.json"
	MemoryFile  = "memory.jsonl"
)

// SessionInfo is session.json: what a resume needs besides the memory.
type SessionInfo struct {
	ID       string          `json:"id"`
	Workdir  string          `json:"workdir"`
	Status   string          `json:"status" jsonschema:"description=running, done, failed, interrupted"`
	State    string          `json:"state"`
	Step     int             `json:"step"`
	Task     string          `json:"task,omitempty"`
	Usage    protocol.Usage  `json:"usage"`
	Tasks    []protocol.Task `json:"tasks,omitempty" jsonschema:"description=the tasks of a --task or --tasks run, with their statuses"`
	Team     string          `json:"team,omitempty"`
	Worker   string          `json:"worker,omitempty"`
	Pipeline string          `json:"pipeline,omitempty"`
	PID      int             `json:"pid"`
	// Options are the run's options as the command line tool saved them,
	// for a resume.
	Options   json.RawMessage `json:"options,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// Memory record types of memory.jsonl. The conversation of a task is
// rebuilt by replaying them in order.
const (
	MemTask    = "task"    // a task started or ended (status)
	MemMessage = "message" // a message appended to the conversation
	MemPrune   = "prune"   // tool outputs of messages before Before were pruned
	MemSummary = "summary" // messages 1..KeepFrom-1 were replaced by Summary
	MemFresh   = "fresh"   // a Ralph iteration restarted the conversation
	MemReplace = "replace" // message Index was replaced by Message (a long text cut to fit the window)
)

// MemoryRecord is one line of memory.jsonl.
type MemoryRecord struct {
	Type      string            `json:"type"`
	TS        time.Time         `json:"ts"`
	Task      string            `json:"task,omitempty"`
	Status    string            `json:"status,omitempty"`
	TaskRec   *protocol.Task    `json:"task_record,omitempty"`
	Message   *protocol.Message `json:"message,omitempty"`
	Usage     *protocol.Usage   `json:"usage,omitempty"`
	Before    int               `json:"before,omitempty"`
	KeepFrom  int               `json:"keep_from,omitempty"`
	Summary   string            `json:"summary,omitempty"`
	Iteration int               `json:"iteration,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	Index     int               `json:"index,omitempty"`
}

// Session is an open session directory.
type Session struct {
	Dir  string
	Info SessionInfo

	mu  sync.Mutex
	mem *os.File
}

// NewSessionID returns a sortable, unique session id.
func NewSessionID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "s-" + now.UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// CreateSession makes a new session directory.
func CreateSession(home, workdir string, now time.Time) (*Session, error) {
	id := NewSessionID(now)
	dir := filepath.Join(teamdir.Sessions(home), id)
	if err := os.MkdirAll(dir, teamdir.DirMode); err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	s := &Session{Dir: dir, Info: SessionInfo{ID: id, Workdir: workdir, Status: "running", State: string(Idle), PID: os.Getpid(), CreatedAt: now.UTC(), UpdatedAt: now.UTC()}}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, s.Save(now)
}

// OpenSession opens an existing session by id.
func OpenSession(home, id string) (*Session, error) {
	if err := teamdir.ValidName("session", id); err != nil {
		return nil, err
	}
	dir := filepath.Join(teamdir.Sessions(home), id)
	b, err := os.ReadFile(filepath.Join(dir, SessionFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, &NotFoundError{What: "session " + id}
	}
	if err != nil {
		return nil, err
	}
	s := &Session{Dir: dir}
	if err := json.Unmarshal(b, &s.Info); err != nil {
		return nil, fmt.Errorf("session %s: %s: %w", id, SessionFile, err)
	}
	return s, s.open()
}

// NotFoundError names something that does not exist.
type NotFoundError struct{ What string }

func (e *NotFoundError) Error() string { return e.What + " not found" }

// LatestSession finds the most recently updated session of workdir.
func LatestSession(home, workdir string) (string, error) {
	entries, err := os.ReadDir(teamdir.Sessions(home))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	type cand struct {
		id string
		at time.Time
	}
	var cands []cand
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(teamdir.Sessions(home), e.Name(), SessionFile))
		if err != nil {
			continue
		}
		var info SessionInfo
		if json.Unmarshal(b, &info) != nil || info.Workdir != workdir {
			continue
		}
		cands = append(cands, cand{info.ID, info.UpdatedAt})
	}
	if len(cands) == 0 {
		return "", &NotFoundError{What: "a session for " + workdir}
	}
	sort.Slice(cands, func(i, j int) bool {
		if !cands[i].at.Equal(cands[j].at) {
			return cands[i].at.After(cands[j].at)
		}
		return cands[i].id > cands[j].id
	})
	return cands[0].id, nil
}

func (s *Session) open() error {
	f, err := os.OpenFile(filepath.Join(s.Dir, MemoryFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, teamdir.FileMode)
	if err != nil {
		return fmt.Errorf("open session memory: %w", err)
	}
	s.mem = f
	return nil
}

// Append writes memory records, one write per call so a kill leaves whole
// lines, with secrets redacted.
func (s *Session) Append(recs ...MemoryRecord) error {
	var buf []byte
	for _, r := range recs {
		line, err := jsonl.Marshal(r)
		if err != nil {
			return err
		}
		buf = append(buf, line...)
	}
	buf = secrets.Redact(buf)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.mem.Write(buf); err != nil {
		return fmt.Errorf("append session memory: %w", err)
	}
	return nil
}

// Save atomically replaces session.json.
func (s *Session) Save(now time.Time) error {
	s.mu.Lock()
	s.Info.UpdatedAt = now.UTC()
	b, err := json.MarshalIndent(&s.Info, "", "  ")
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(s.Dir, SessionFile), append(b, '\n'), teamdir.FileMode)
}

// Close closes the memory file.
func (s *Session) Close() error {
	if s.mem == nil {
		return nil
	}
	return s.mem.Close()
}

// Replay is the state rebuilt from memory.jsonl.
type Replay struct {
	Ended   map[string]string // task id -> done/failed/released
	Current *protocol.Task    // the task started and not ended, if any
	Conv    []protocol.Message
	Steps   int // model turns of the current task
	Iter    int
	// TotalSteps counts the model turns of the whole session.
	TotalSteps int
	Usage      protocol.Usage
	Records    int
}

// memLine is how replay decodes a memory record: like MemoryRecord, but
// with the content as a plain block list (no string-or-array detour) and
// without the fields replay does not use.
type memLine struct {
	Type    string         `json:"type"`
	Task    string         `json:"task"`
	Status  string         `json:"status"`
	TaskRec *protocol.Task `json:"task_record"`
	Message *struct {
		Role    string           `json:"role"`
		Content []protocol.Block `json:"content"`
	} `json:"message"`
	Usage     *protocol.Usage `json:"usage"`
	Before    int             `json:"before"`
	KeepFrom  int             `json:"keep_from"`
	Summary   string          `json:"summary"`
	Iteration int             `json:"iteration"`
	Index     int             `json:"index"`
}

// ReadMemory replays a memory file. Lines are decoded in parallel, then
// applied in order. A line that does not decode (the torn last line of a
// writer killed mid-write) is skipped.
func ReadMemory(r io.Reader) (*Replay, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", MemoryFile, err)
	}
	var lines [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines = append(lines, data)
			break
		}
		if i > 0 {
			lines = append(lines, data[:i])
		}
		data = data[i+1:]
	}
	recs := make([]MemoryRecord, len(lines))
	ok := make([]bool, len(lines))
	workers := runtime.GOMAXPROCS(0)
	chunk := (len(lines) + workers - 1) / workers
	var wg sync.WaitGroup
	for w := 0; w < workers && w*chunk < len(lines); w++ {
		lo, hi := w*chunk, min((w+1)*chunk, len(lines))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				var m memLine
				if json.Unmarshal(lines[i], &m) != nil {
					continue
				}
				rec := MemoryRecord{Type: m.Type, Task: m.Task, Status: m.Status, TaskRec: m.TaskRec, Usage: m.Usage,
					Before: m.Before, KeepFrom: m.KeepFrom, Summary: m.Summary, Iteration: m.Iteration, Index: m.Index}
				if m.Message != nil {
					rec.Message = &protocol.Message{Role: m.Message.Role, Content: m.Message.Content}
				}
				recs[i], ok[i] = rec, true
			}
		}()
	}
	wg.Wait()
	rp := &Replay{Ended: map[string]string{}}
	for i := range recs {
		if !ok[i] {
			continue
		}
		// A resumed session's usage counts against the budgets: a
		// negative one (edited by hand) would buy calls.
		if u := recs[i].Usage; u != nil {
			if err := u.Check(); err != nil {
				return nil, fmt.Errorf("%s: record %d: usage: %w", MemoryFile, i+1, err)
			}
		}
		rp.Records++
		rp.apply(&recs[i])
	}
	return rp, nil
}

func (rp *Replay) apply(rec *MemoryRecord) {
	switch rec.Type {
	case MemTask:
		if rec.Status == "started" {
			rp.Current = rec.TaskRec
			if rp.Current == nil {
				rp.Current = &protocol.Task{ID: rec.Task}
			}
			rp.Conv, rp.Steps, rp.Iter = nil, 0, 0
			return
		}
		rp.Ended[rec.Task] = rec.Status
		if rp.Current != nil && rp.Current.ID == rec.Task {
			rp.Current, rp.Conv, rp.Steps, rp.Iter = nil, nil, 0, 0
		}
	case MemMessage:
		if rec.Message == nil {
			return
		}
		rp.Conv = append(rp.Conv, *rec.Message)
		if rec.Message.Role == protocol.RoleAssistant {
			rp.Steps++
			rp.TotalSteps++
		}
		if rec.Usage != nil {
			rp.Usage = rp.Usage.Add(*rec.Usage)
		}
	case MemPrune:
		rp.Conv = pruneBefore(rp.Conv, rec.Before)
	case MemSummary:
		rp.Conv = applySummary(rp.Conv, rec.KeepFrom, rec.Summary)
		if rec.Usage != nil {
			rp.Usage = rp.Usage.Add(*rec.Usage)
		}
	case MemReplace:
		if rec.Message != nil && rec.Index >= 0 && rec.Index < len(rp.Conv) {
			rp.Conv[rec.Index] = *rec.Message
		}
	case MemFresh:
		if len(rp.Conv) > 0 {
			rp.Conv = rp.Conv[:1]
		}
		if rec.Message != nil {
			rp.Conv = []protocol.Message{*rec.Message}
		}
		rp.Iter = rec.Iteration
	}
}

// LoadReplay reads the session's memory.
func (s *Session) LoadReplay() (*Replay, error) {
	f, err := os.Open(filepath.Join(s.Dir, MemoryFile))
	if errors.Is(err, os.ErrNotExist) {
		return &Replay{Ended: map[string]string{}}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadMemory(f)
}
