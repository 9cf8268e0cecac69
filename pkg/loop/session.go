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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
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
	// LockFile is held (flock) by the process that drives the session,
	// for as long as it runs; it holds that process's pid, for the message
	// of a second one. The kernel lets it go when the process dies.
	LockFile = "lock"
)

// SessionInfo is session.json: what a resume needs besides the memory.
type SessionInfo struct {
	ID       string          `json:"id"`
	Parent   string          `json:"parent,omitempty" jsonschema:"description=the session this one was forked from"`
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
	PIDStart string          `json:"pid_start,omitempty" jsonschema:"description=the start time of the process that last ran the session"`
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
	MemCharge  = "charge"  // a model call that failed was charged Usage all the same (attempts cut after the input was counted)
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
	// Follows, on a task's started record, names the task whose
	// conversation the task continues (a follow-up).
	Follows string `json:"follows,omitempty"`
}

// Session is an open session directory.
type Session struct {
	Dir  string
	Info SessionInfo

	// Torn is how many bytes of a partial last record (a write cut short
	// by a kill or a full disk) Lock cut off the memory.
	Torn int64

	mu     sync.Mutex
	mem    *os.File     // the memory, open for appends while this process drives the session
	size   int64        // its length up to the last whole record
	broken error        // the append that failed: no record may follow a missing one
	lock   *flock.Flock // held while this process drives the session
}

// NewSessionID returns a sortable, unique session id.
func NewSessionID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "s-" + now.UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// CreateSession makes a new session directory.
func CreateSession(home, workdir string, now time.Time) (*Session, error) {
	return CreateSessionID(home, workdir, "", now)
}

// CreateSessionID makes a new session directory named id (a new id when
// empty). An id that is taken is an *ExistsError.
func CreateSessionID(home, workdir, id string, now time.Time) (*Session, error) {
	dir, id, err := makeSessionDir(home, id, now)
	if err != nil {
		return nil, err
	}
	s := &Session{Dir: dir, Info: SessionInfo{ID: id, Workdir: workdir, Status: "running", State: string(Idle), PID: os.Getpid(), CreatedAt: now.UTC(), UpdatedAt: now.UTC()}}
	if err := s.Lock(); err != nil {
		return nil, err
	}
	return s, s.Save(now)
}

// makeSessionDir creates the directory of a new session: atomically, so
// two runs never share one.
func makeSessionDir(home, id string, now time.Time) (dir, newID string, err error) {
	if id == "" {
		id = NewSessionID(now)
	} else if err := teamdir.ValidName("session", id); err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(teamdir.Sessions(home), teamdir.DirMode); err != nil {
		return "", "", fmt.Errorf("create session: %w", err)
	}
	dir = filepath.Join(teamdir.Sessions(home), id)
	if err := os.Mkdir(dir, teamdir.DirMode); err != nil {
		if errors.Is(err, os.ErrExist) {
			return "", "", &ExistsError{What: "session " + id}
		}
		return "", "", fmt.Errorf("create session: %w", err)
	}
	return dir, id, nil
}

// ExistsError names something that already exists.
type ExistsError struct{ What string }

func (e *ExistsError) Error() string { return e.What + " already exists" }

// SessionExists reports whether session id exists.
func SessionExists(home, id string) bool {
	_, err := os.Stat(filepath.Join(teamdir.Sessions(home), id))
	return err == nil
}

// ForkSession starts a new session (named id, or a new id) from a copy of
// parent's history: its memory up to the last whole record, its tasks and
// its run's options. The fork records its parent; the two go their own
// ways from here.
func ForkSession(home string, parent *Session, id, workdir string, now time.Time) (*Session, error) {
	mem, err := os.ReadFile(filepath.Join(parent.Dir, MemoryFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("fork %s: %w", parent.Info.ID, err)
	}
	// A running parent may be writing a line: only whole lines are copied.
	mem = mem[:bytes.LastIndexByte(mem, '\n')+1]
	dir, id, err := makeSessionDir(home, id, now)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, MemoryFile), mem, teamdir.FileMode); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("fork %s: %w", parent.Info.ID, err)
	}
	parent.mu.Lock()
	info := parent.Info
	info.Tasks = append([]protocol.Task(nil), parent.Info.Tasks...)
	parent.mu.Unlock()
	info.ID, info.Parent, info.Workdir = id, parent.Info.ID, workdir
	info.Status, info.PID, info.CreatedAt, info.UpdatedAt = "running", os.Getpid(), now.UTC(), now.UTC()
	s := &Session{Dir: dir, Info: info}
	if err := s.Lock(); err != nil {
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
	b, err := atomicfile.ReadFile(filepath.Join(dir, SessionFile), 0)
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
	return s, nil
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
		b, err := atomicfile.ReadFile(filepath.Join(teamdir.Sessions(home), e.Name(), SessionFile), 0)
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

// open opens the memory for the driver's appends, cut back to its last
// whole record: a partial one (a write cut short by a kill or a full
// disk) would otherwise sit between the records appended after it.
func (s *Session) open() error {
	f, err := os.OpenFile(filepath.Join(s.Dir, MemoryFile), os.O_RDWR|os.O_APPEND|os.O_CREATE, teamdir.FileMode)
	if err != nil {
		return fmt.Errorf("open session memory: %w", err)
	}
	size, whole, err := wholeLength(f)
	if err == nil && whole < size {
		err = f.Truncate(whole)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("open session memory: %w", err)
	}
	s.mem, s.size, s.Torn = f, whole, size-whole
	return nil
}

// wholeLength is the length of f and of its whole lines: up to the last
// newline.
func wholeLength(f *os.File) (size, whole int64, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size = fi.Size()
	buf := make([]byte, 64<<10)
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return size, start + int64(i) + 1, nil
		}
		end = start
	}
	return size, 0, nil
}

// Append writes memory records, one write per call so a kill leaves whole
// lines, with secrets redacted. It is all or nothing: a write that fails
// (a full disk, a file size limit) is cut back off the file, so no reader
// sees part of a record, and every later Append fails with the same error,
// so none sees a record whose predecessor is missing.
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
	switch {
	case s.broken != nil:
		return s.broken
	case s.mem == nil:
		return fmt.Errorf("append session memory: session %s is not held by this process", s.Info.ID)
	}
	n, err := s.mem.Write(buf)
	if err != nil {
		s.broken = fmt.Errorf("append session memory: %w", err)
		if n > 0 {
			if terr := s.mem.Truncate(s.size); terr != nil {
				s.broken = fmt.Errorf("append session memory: %w (and cutting the partial record off failed: %v)", err, terr)
			}
		}
		return s.broken
	}
	s.size += int64(n)
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

// BusyError says that another process drives the session.
type BusyError struct {
	ID  string
	PID int // 0 when the holder has not written it yet
}

func (e *BusyError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "pid " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("session %s is running as %s: one process drives a session at a time", e.ID, holder)
}

// Lock makes this process the session's only driver until Close: two
// processes appending to one memory would interleave two conversations
// and run the task twice. A session another live process holds is a
// *BusyError naming its pid; a lock left by a dead one is free. Only a
// driver takes it: listing and showing sessions never does. It opens the
// memory for Append, cut back to its last whole record (see Torn).
func (s *Session) Lock() error {
	path := filepath.Join(s.Dir, LockFile)
	lk := flock.New(path, flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(teamdir.FileMode))
	ok, err := lk.TryLock()
	if err != nil {
		return fmt.Errorf("lock session %s: %w", s.Info.ID, err)
	}
	if !ok {
		b, _ := os.ReadFile(path)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return &BusyError{ID: s.Info.ID, PID: pid}
	}
	// Written in place, never renamed: the lock is on this inode.
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), teamdir.FileMode); err != nil {
		lk.Close()
		return fmt.Errorf("lock session %s: %w", s.Info.ID, err)
	}
	if err := s.open(); err != nil {
		lk.Close()
		return err
	}
	s.lock = lk
	return nil
}

// Close closes the memory file and lets the session go.
func (s *Session) Close() error {
	var err error
	if s.mem != nil {
		err = s.mem.Close()
		s.mem = nil
	}
	if s.lock != nil {
		s.lock.Close()
		s.lock = nil
	}
	return err
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
	// Last is the conversation of the task that ended last, up to its
	// final answer: what a follow-up task continues.
	Last []protocol.Message
	// LastTask is that task's id.
	LastTask string
	// Warnings name the lines left out: a record cut short, or a line
	// that is no record at all.
	Warnings []string
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
	Follows   string          `json:"follows"`
}

// ReadMemory replays a memory file. Lines are decoded in parallel, then
// applied in order. A line that does not decode is left out with a
// warning: the partial last line of a writer killed mid-write, or, mid-file,
// what an older version left after a failed write (records may be missing
// around it).
func ReadMemory(r io.Reader) (*Replay, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", MemoryFile, err)
	}
	var lines [][]byte
	var numbers []int // the line number of each of lines
	torn := len(data) > 0 && data[len(data)-1] != '\n'
	for n := 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines, numbers = append(lines, data), append(numbers, n)
			break
		}
		if i > 0 {
			lines, numbers = append(lines, data[:i]), append(numbers, n)
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
					Before: m.Before, KeepFrom: m.KeepFrom, Summary: m.Summary, Iteration: m.Iteration, Index: m.Index, Follows: m.Follows}
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
			if i == len(lines)-1 && torn {
				rp.Warnings = append(rp.Warnings, fmt.Sprintf("%s: the last record (line %d) is cut short, a write interrupted: left out", MemoryFile, numbers[i]))
			} else {
				rp.Warnings = append(rp.Warnings, fmt.Sprintf("%s: line %d is not a whole record: left out; records written after a failed write may be missing", MemoryFile, numbers[i]))
			}
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
			if rec.Follows != "" && rec.Follows == rp.LastTask {
				rp.Conv = append([]protocol.Message(nil), rp.Last...)
			}
			return
		}
		rp.Ended[rec.Task] = rec.Status
		if rp.Current != nil && rp.Current.ID == rec.Task {
			rp.Last, rp.LastTask = FollowUpBase(rp.Conv), rec.Task
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
	case MemCharge:
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

// FollowUpBase is the part of a finished task's conversation a follow-up
// task continues: up to its last final answer (an assistant message
// without tool calls), so the follow-up's prompt comes after an answer,
// never between a tool call and its result. Nil when there is none.
func FollowUpBase(conv []protocol.Message) []protocol.Message {
	for i := len(conv) - 1; i >= 0; i-- {
		if conv[i].Role == protocol.RoleAssistant && len(conv[i].Content.ToolCalls()) == 0 {
			return append([]protocol.Message(nil), conv[:i+1]...)
		}
	}
	return nil
}

// LabelFollowUp is the task label that makes a task a follow-up: it starts
// from the conversation of the session's task that ended last.
const LabelFollowUp = "follow_up"

// followUp is the conversation a task starts from: the last finished
// task's, when the task is a follow-up; else nothing.
func (r *Runner) followUp(t *protocol.Task) ([]protocol.Message, string) {
	if v, _ := strconv.ParseBool(label(t, LabelFollowUp)); !v || r.fresh(t) || len(r.last) == 0 {
		return nil, ""
	}
	return append([]protocol.Message(nil), r.last...), r.lastTask
}

// AppendTasks adds tasks after a session's own (a --task or --tasks given
// to a resumed or forked session): none is dropped and no id is used
// twice. An added id of the form task-N that is taken (the default ids)
// gets the next free number; any other taken id is an error. used holds
// further ids the session has seen (its memory's tasks).
func AppendTasks(have, add []protocol.Task, used map[string]bool) ([]protocol.Task, error) {
	taken := map[string]bool{}
	for id := range used {
		taken[id] = true
	}
	next := 1
	for _, t := range have {
		taken[t.ID] = true
	}
	for id := range taken {
		if n, ok := taskNumber(id); ok && n >= next {
			next = n + 1
		}
	}
	out := append([]protocol.Task(nil), have...)
	for _, t := range add {
		if taken[t.ID] {
			if _, ok := taskNumber(t.ID); !ok {
				return nil, fmt.Errorf("task id %q is already in the session", t.ID)
			}
			for taken["task-"+strconv.Itoa(next)] {
				next++
			}
			t.ID = "task-" + strconv.Itoa(next)
		}
		if n, ok := taskNumber(t.ID); ok && n >= next {
			next = n + 1
		}
		taken[t.ID] = true
		out = append(out, t)
	}
	return out, nil
}

func taskNumber(id string) (int, bool) {
	rest, ok := strings.CutPrefix(id, "task-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n > 0
}

// ResumedTasks is a resumed session's task list: ended tasks keep the
// status memory.jsonl gave them; a task claimed when the run stopped is
// pending again.
func ResumedTasks(info *SessionInfo, rp *Replay) []protocol.Task {
	ts := append([]protocol.Task(nil), info.Tasks...)
	for i := range ts {
		if st, ok := rp.Ended[ts[i].ID]; ok {
			ts[i].Status = st
		} else if ts[i].Status == protocol.StatusClaimed {
			ts[i].Status = protocol.StatusPending
		}
	}
	return ts
}
