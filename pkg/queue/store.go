package queue

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// File names this package adds to the team directory (DESIGN.md §3 leaves
// the storage below task-queue.json to the queue).
const (
	// ArchiveFile holds finished tasks moved out of task-queue.json, one
	// JSON task per line, oldest first.
	ArchiveFile = "task-archive.jsonl"
	// IndexFile is a binary cache of the scheduling fields of every live
	// task and where its JSON sits in task-queue.json. It is rebuilt from
	// task-queue.json whenever it does not match it, so it can be deleted
	// at any time.
	IndexFile = "task-queue.idx"
)

// header is the first line of task-queue.json. The file reads:
//
//	{"type":"task-queue","version":1,"generation":7,...,"tasks":[
//	{task},
//	{task}
//	]}
//
// one task per line, so the queue can splice a changed task in without
// decoding the others, and jq sees one ordinary JSON document.
type header struct {
	Type       string    `json:"type"`
	Version    int       `json:"version"`
	Generation int64     `json:"generation"`
	NextToken  int64     `json:"next_token"`
	UpdatedAt  time.Time `json:"updated_at"`
	// Archived counts the tasks moved to task-archive.jsonl, by status.
	Archived map[string]int `json:"archived"`
	// FinishedDeps keeps the final status of archived tasks that live
	// tasks still depend on, so dependency checks never read the archive.
	FinishedDeps map[string]string `json:"finished_deps"`
	// Journal holds the events of the change that wrote this version, so
	// that a writer killed after the rename but before its append to
	// events.jsonl loses none: the next writer appends what is missing.
	Journal *pendingEvents `json:"journal,omitempty"`
	// ArchiveRewrite says this version was written by a prune that
	// rewrote task-archive.jsonl: the new archive waits in
	// archiveNextName(generation) until it is renamed into place.
	ArchiveRewrite bool `json:"archive_rewrite,omitempty"`
	// ArchiveSize is the size of task-archive.jsonl that goes with this
	// version. Tasks are appended to the archive before the version that
	// drops them from the live file is committed; a writer killed in
	// between leaves lines past this size, which the next writer cuts off
	// before archiving again, so the archive never holds a task twice.
	// Absent in files written by hand or by older versions.
	ArchiveSize *int64 `json:"archive_size,omitempty"`
	// Extra holds the members of the document this version does not know
	// (see extra.go), written back as they were.
	Extra map[string]json.RawMessage `json:"-"`
}

// pendingEvents are the journal lines of one change.
type pendingEvents struct {
	// Offset is the size of events.jsonl before the change: its lines, if
	// they were appended, are after it.
	Offset int64             `json:"offset"`
	Events []json.RawMessage `json:"events"`
}

// Version is the layout of task-queue.json this package reads and writes.
// A file of a newer version is refused, never rewritten as this one (it
// may hold what this version would drop); a file without a version (written
// by hand) is read as this one.
const Version = 1

const (
	headerType = "task-queue"
	tasksOpen  = `,"tasks":[`
	tasksClose = "]}\n"
)

// document is the slow-path reading of task-queue.json, for a file written
// by something else (say, pretty-printed by jq).
type document struct {
	header
	Tasks []json.RawMessage `json:"tasks"`
}

// Status codes kept in the index.
const (
	stPending uint8 = iota
	stClaimed
	stDone
	stFailed
	stCancelled
)

var statusNames = [...]string{protocol.StatusPending, protocol.StatusClaimed, protocol.StatusDone, protocol.StatusFailed, protocol.StatusCancelled}

func statusCode(s string) (uint8, bool) {
	for i, n := range statusNames {
		if n == s {
			return uint8(i), true
		}
	}
	return 0, false
}

func finished(st uint8) bool { return st >= stDone }

// entry is what scheduling needs to know about one live task, and where its
// JSON is.
type entry struct {
	id          string
	status      uint8
	priority    int64
	attempts    int64
	maxAttempts int64
	token       int64
	until       int64 // claim expiry, unix nanoseconds; 0 without claim
	worker      string
	created     int64
	updated     int64
	deps        []string
	off, n      int    // the task's JSON in state.data
	raw         []byte // the new JSON of a changed task, nil when unchanged
}

func newEntry(t *protocol.Task, raw []byte) *entry {
	st, _ := statusCode(t.Status)
	e := &entry{id: t.ID, status: st, priority: int64(t.Priority), attempts: int64(t.Attempts),
		maxAttempts: int64(t.MaxAttempts), created: t.CreatedAt.UnixNano(), updated: t.UpdatedAt.UnixNano(),
		deps: t.DependsOn, raw: raw}
	if t.Claim != nil {
		e.token, e.until, e.worker = t.Claim.Token, t.Claim.Until.UnixNano(), t.Claim.Worker
	}
	return e
}

// state is the queue as loaded from disk.
type state struct {
	hdr header
	// entries are the live tasks in file order. While lazy is set they
	// are not decoded yet: calls that need them call all() first; Claim
	// and the calls on one task walk lazy instead.
	entries []*entry
	lazy    *lazyIndex
	base    int // offset of the first task in task-queue.json
	// f is the version of task-queue.json the entries describe, kept open:
	// a task is read from it on demand and unchanged tasks are copied from
	// it into the next version (copy_file_range) without passing through
	// memory. data is its whole content once something needed it.
	f     *os.File
	data  []byte
	byID  map[string]int
	scans int // lookups done without byID
	stat  fileStamp
	// settled: the journal and the archive hold what the header says this
	// version added to them. True after this process wrote the version
	// (or settled it), and when the index matched: the index is written
	// only once a version is settled.
	settled bool
}

// fileStamp identifies one version of task-queue.json: it is replaced by
// rename, so a new version has a new inode.
type fileStamp struct {
	ino, size, mtime int64
}

func stampOf(fi fs.FileInfo) fileStamp {
	s := fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = int64(st.Ino)
	}
	return s
}

func emptyState() *state {
	return &state{hdr: header{Type: headerType, Version: Version, NextToken: 1,
		Archived: map[string]int{}, FinishedDeps: map[string]string{}}, settled: true}
}

func (s *state) close() {
	if s == nil {
		return
	}
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// all decodes the entries when they are not yet.
func (s *state) all() error {
	if s.lazy == nil {
		return nil
	}
	entries, ok := s.lazy.materialize(s.stat.size)
	if !ok {
		// An index that passed its checks but does not add up: read the
		// file itself.
		if err := s.readAll(); err != nil {
			return err
		}
		patch := s.lazy.patch
		s.lazy = nil
		if !s.parseLines() || len(patch) > 0 {
			return fmt.Errorf("task-queue.idx does not match task-queue.json (delete it)")
		}
		return nil
	}
	s.entries, s.lazy, s.byID = entries, nil, nil
	return nil
}

func (s *state) index(id string) (int, bool) {
	if s.all() != nil {
		return 0, false
	}
	if s.byID == nil && s.scans < 8 {
		// A few lookups (a complete, a renew) cost less than the map.
		s.scans++
		for i, e := range s.entries {
			if e.id == id {
				return i, true
			}
		}
		return 0, false
	}
	if s.byID == nil {
		s.byID = make(map[string]int, len(s.entries))
		for i, e := range s.entries {
			s.byID[e.id] = i
		}
	}
	i, ok := s.byID[id]
	return i, ok
}

// json returns the task's JSON.
func (s *state) json(e *entry) ([]byte, error) {
	if e.raw != nil {
		return e.raw, nil
	}
	if s.data != nil {
		return s.data[e.off : e.off+e.n], nil
	}
	b := make([]byte, e.n)
	if _, err := s.f.ReadAt(b, int64(e.off)); err != nil {
		return nil, fmt.Errorf("read task-queue.json: %w", err)
	}
	return b, nil
}

// readAll loads the whole file, for calls that decode most tasks.
func (s *state) readAll() error {
	if s.data != nil || s.f == nil {
		return nil
	}
	data := make([]byte, s.stat.size)
	if _, err := s.f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read task-queue.json: %w", err)
	}
	s.data = data
	return nil
}

// task decodes one live task.
func (s *state) task(e *entry) (*protocol.Task, error) {
	js, err := s.json(e)
	if err != nil {
		return nil, err
	}
	var t protocol.Task
	if err := decodeTask(js, &t); err != nil {
		return nil, fileErr("task-queue.json: task %s: %w", e.id, err)
	}
	if t.ID != e.id {
		return nil, fmt.Errorf("task-queue.json: task %s: found %q where the index says it is (delete task-queue.idx)", e.id, t.ID)
	}
	normalize(&t)
	return &t, nil
}

// put stores a changed task back into its entry.
func (s *state) put(i int, t *protocol.Task) error {
	normalize(t)
	raw, err := marshalTask(t)
	if err != nil {
		return err
	}
	if s.lazy != nil {
		if s.lazy.patch == nil {
			s.lazy.patch = map[int]*entry{}
		}
		s.lazy.patch[i] = newEntry(t, raw)
		return nil
	}
	s.entries[i] = newEntry(t, raw)
	return nil
}

// find returns the position and entry of a live task without decoding
// the others (from the index, the entry has no dependencies: decode the
// task for them).
func (s *state) find(id string) (int, *entry, error) {
	if s.lazy == nil {
		i, ok := s.index(id)
		if !ok {
			return 0, nil, nil
		}
		return i, s.entries[i], nil
	}
	pos, found := -1, entry{}
	ok := s.lazy.each(s.stat.size, false, func(i int, e *entry, _ bool) bool {
		if e.id != id {
			return true
		}
		pos, found = i, *e
		return false
	})
	if !ok {
		if err := s.all(); err != nil {
			return 0, nil, err
		}
		return s.find(id)
	}
	if pos < 0 {
		return 0, nil, nil
	}
	return pos, &found, nil
}

// marshalTask encodes a task as stored, secrets redacted: the stored bytes
// are indexed, so they are redacted here and never changed later.
func marshalTask(t *protocol.Task) ([]byte, error) {
	b, err := EncodeTask(t)
	if err != nil {
		return nil, fmt.Errorf("encode task %s: %w", t.ID, err)
	}
	return secrets.Redact(b), nil
}

// normalize makes the lists empty instead of null, as DESIGN.md §3 shows.
func normalize(t *protocol.Task) {
	if t.DependsOn == nil {
		t.DependsOn = []string{}
	}
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Blocked = false
}

// statusOf returns the status of a task the live tasks may depend on:
// a live task, or an archived one remembered in finished_deps.
func (s *state) statusOf(id string) (uint8, bool) {
	if i, ok := s.index(id); ok {
		return s.entries[i].status, true
	}
	if st, ok := s.hdr.FinishedDeps[id]; ok {
		c, ok := statusCode(st)
		return c, ok
	}
	return 0, false
}

// depsDone reports whether every dependency of e is done.
func (s *state) depsDone(e *entry) bool {
	for _, d := range e.deps {
		if st, ok := s.statusOf(d); !ok || st != stDone {
			return false
		}
	}
	return true
}

// load reads the queue. A missing file is an empty queue. When the index
// matches the file, only the header line and the index are read;
// otherwise the file is decoded whole.
func load(dir string) (*state, error) {
	qpath := filepath.Join(dir, teamdir.QueueFile)
	f, err := atomicfile.Open(qpath)
	if errors.Is(err, fs.ErrNotExist) {
		return emptyState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("open task-queue.json: %w", err)
	}
	s, err := loadFile(dir, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func loadFile(dir string, f *os.File) (*state, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat task-queue.json: %w", err)
	}
	s := &state{f: f, stat: stampOf(fi)}
	// The header line: usually small, larger when many live tasks depend
	// on archived ones or the last change had many events.
	var head []byte
	for size := int64(4 << 10); ; size *= 16 {
		head = make([]byte, min(s.stat.size, size))
		if _, err := f.ReadAt(head, 0); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read task-queue.json: %w", err)
		}
		if bytes.IndexByte(head, '\n') >= 0 || int64(len(head)) == s.stat.size {
			break
		}
	}
	if hdr, ok := fastHeader(head); ok {
		s.hdr = hdr
		s.base = bytes.IndexByte(head, '\n') + 1
		if l, ok := readIndex(filepath.Join(dir, IndexFile), s.hdr.Generation, s.stat, s.base); ok {
			s.lazy = l
			s.settled = true
			return s, nil
		}
	}
	if err := s.readAll(); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(s.data)) == 0 {
		e := emptyState()
		e.f, e.stat, e.data = s.f, s.stat, s.data
		return e, nil
	}
	parsed := false
	if hdr, ok := fastHeader(s.data); ok {
		s.hdr = hdr
		parsed = s.parseLines()
	}
	if !parsed {
		if err := s.parseDocument(dir); err != nil {
			return nil, err
		}
	}
	// A file written by hand may hold claims with tokens the header has
	// not given yet: tokens must never be given twice.
	for _, e := range s.entries {
		if e.token >= s.hdr.NextToken {
			s.hdr.NextToken = e.token + 1
		}
	}
	return s, nil
}

func fixHeader(h *header) {
	if h.Archived == nil {
		h.Archived = map[string]int{}
	}
	if h.FinishedDeps == nil {
		h.FinishedDeps = map[string]string{}
	}
	if h.NextToken < 1 {
		h.NextToken = 1
	}
	h.Type, h.Version = headerType, Version
}

// fastHeader reads the first line when the file is in the queue's own
// layout.
func fastHeader(data []byte) (header, bool) {
	var h header
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return h, false
	}
	line := data[:nl]
	if !bytes.HasSuffix(line, []byte(tasksOpen)) {
		return h, false
	}
	js := append(bytes.Clone(line[:len(line)-len(tasksOpen)]), '}')
	if json.Unmarshal(js, &h) != nil || h.Type != headerType || (h.Version != Version && h.Version != 0) {
		return h, false // (parseDocument refuses a newer version)
	}
	h.Extra = unknownFields(js, headerKeys())
	fixHeader(&h)
	return h, true
}

// parseLines decodes the tasks of a file in the queue's own layout, one per
// line, each but the last followed by a comma. It reports false when the
// file is not exactly that (parseDocument then decides, as jq would).
func (s *state) parseLines() bool {
	data := s.data
	pos := bytes.IndexByte(data, '\n') + 1
	var entries []*entry
	seen := map[string]bool{}
	comma := false // the previous task line ended with a comma
	for {
		nl := bytes.IndexByte(data[pos:], '\n')
		if nl < 0 {
			return false
		}
		line := data[pos : pos+nl]
		if string(line) == "]}" {
			if comma || len(bytes.TrimSpace(data[pos+nl:])) != 0 {
				return false
			}
			break
		}
		if len(entries) > 0 && !comma {
			return false
		}
		n := len(bytes.TrimSuffix(line, []byte{','}))
		comma = n < len(line)
		var t protocol.Task
		if json.Unmarshal(line[:n], &t) != nil {
			return false
		}
		var raw []byte
		if loadDefaults(&t, s.stat.mtime) {
			t.Extra = unknownFields(line[:n], taskKeys())
			var err error
			if raw, err = marshalTask(&t); err != nil {
				return false
			}
		}
		if !validStored(&t) || seen[t.ID] {
			return false
		}
		seen[t.ID] = true
		e := newEntry(&t, raw)
		e.off, e.n = pos, n
		entries = append(entries, e)
		pos += nl + 1
	}
	s.entries = entries
	return true
}

// loadDefaults gives a task read from task-queue.json the defaults Add
// gives a new task, for tasks added or edited by hand; mtime (of the file)
// stands in for a missing created_at. It reports whether it changed
// something.
func loadDefaults(t *protocol.Task, mtime int64) bool {
	changed := false
	if t.Status == "" || (t.Status == protocol.StatusClaimed && t.Claim == nil) {
		t.Status, changed = protocol.StatusPending, true
	}
	if t.MaxAttempts <= 0 {
		t.MaxAttempts, changed = DefaultMaxAttempts, true
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt, changed = t.UpdatedAt, true
		if t.CreatedAt.IsZero() {
			t.CreatedAt = time.Unix(0, mtime).UTC()
		}
	}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt, changed = t.CreatedAt, true
	}
	if strings.TrimSpace(t.Title) == "" {
		t.Title, changed = defaultTitle(t.Prompt), true
		if t.Title == "" {
			t.Title = t.ID
		}
	}
	if t.DependsOn == nil || t.Labels == nil || t.Blocked {
		normalize(t)
		changed = true
	}
	return changed
}

func validStored(t *protocol.Task) bool {
	_, ok := statusCode(t.Status)
	return ok && t.ID != ""
}

// parseDocument decodes task-queue.json as any JSON document of the right
// shape: pretty-printed by jq, or written by hand. What a missing header
// held is rebuilt from the archive and the journal.
func (s *state) parseDocument(dir string) error {
	var doc document
	var err error
	if t := bytes.TrimSpace(s.data); len(t) > 0 && t[0] == '[' {
		err = json.Unmarshal(t, &doc.Tasks) // a bare list of tasks, as the seed system kept
	} else {
		err = json.Unmarshal(s.data, &doc)
	}
	if err != nil {
		return fileErr("task-queue.json is not a valid queue document: %w", err)
	}
	if t := bytes.TrimSpace(s.data); t[0] == '{' {
		doc.header.Extra = unknownFields(t, headerKeys())
	}
	if doc.header.Version > Version || doc.header.Version < 0 {
		return fileErr("task-queue.json is version %d; this pg-queue reads version %d and does not rewrite a newer one (use the pg-queue that wrote it)", doc.header.Version, Version)
	}
	lost := doc.header.NextToken < 1 || doc.header.Archived == nil || doc.header.FinishedDeps == nil
	rebuild := header{NextToken: doc.header.NextToken, Archived: doc.header.Archived, FinishedDeps: doc.header.FinishedDeps}
	fixHeader(&doc.header)
	s.hdr = doc.header
	s.entries = nil
	seen := map[string]int{}
	for i, raw := range doc.Tasks {
		var t protocol.Task
		if err := decodeTask(raw, &t); err != nil {
			return fileErr("task-queue.json: task %d: %w", i+1, err)
		}
		loadDefaults(&t, s.stat.mtime)
		if !validStored(&t) {
			return fileErr("task-queue.json: task %d: missing id or unknown status %q", i+1, t.Status)
		}
		if j, dup := seen[t.ID]; dup {
			return fileErr("task-queue.json: duplicate task id %s (tasks %d and %d)", t.ID, j+1, i+1)
		}
		seen[t.ID] = i
		b, err := marshalTask(&t)
		if err != nil {
			return err
		}
		s.entries = append(s.entries, newEntry(&t, b))
	}
	if lost {
		return s.rebuildHeader(dir, rebuild)
	}
	return nil
}

// save writes the next version of task-queue.json and refreshes the
// index. Runs of unchanged tasks are copied from the previous version with
// copy_file_range; only changed tasks are encoded.
func (s *state) save(dir string, now time.Time, sync bool) error {
	s.hdr.Generation++
	s.hdr.UpdatedAt = now
	hb, err := jsonl.Marshal(s.hdr) // as the journal lines it may hold: no HTML escapes
	if err != nil {
		return fmt.Errorf("encode queue header: %w", err)
	}
	hb = withExtra(bytes.TrimSuffix(hb, []byte{'\n'}), s.hdr.Extra)
	qpath := filepath.Join(dir, teamdir.QueueFile)
	base := len(hb) - 1 + len(tasksOpen) + 1
	f, err := replace(qpath, sync, func(tmp *os.File) error {
		w := bufio.NewWriterSize(tmp, 32<<10)
		w.Write(hb[:len(hb)-1])
		w.WriteString(tasksOpen)
		w.WriteByte('\n')
		if s.lazy != nil {
			return s.saveLazy(w, tmp)
		}
		pos := base
		for i := 0; i < len(s.entries); {
			e := s.entries[i]
			if e.raw == nil && s.data == nil {
				// A run of tasks that sit together in the old file.
				j := i
				for j+1 < len(s.entries) && s.entries[j+1].raw == nil && s.entries[j+1].off == s.entries[j].off+s.entries[j].n+2 {
					j++
				}
				start, end := e.off, s.entries[j].off+s.entries[j].n
				if err := w.Flush(); err != nil {
					return err
				}
				if _, err := s.f.Seek(int64(start), io.SeekStart); err != nil {
					return err
				}
				n, err := io.Copy(tmp, &io.LimitedReader{R: s.f, N: int64(end - start)})
				if err != nil {
					return err
				}
				if n != int64(end-start) {
					return fmt.Errorf("copy tasks: short copy")
				}
				for k := i; k <= j; k++ {
					s.entries[k].off += pos - start
				}
				pos += end - start
				i = j + 1
			} else {
				js, err := s.json(e)
				if err != nil {
					return err
				}
				e.off, e.n = pos, len(js)
				w.Write(js)
				pos += len(js)
				i++
			}
			if i < len(s.entries) {
				w.WriteString(",\n")
				pos += 2
			} else {
				w.WriteByte('\n')
				pos++
			}
		}
		w.WriteString(tasksClose)
		return w.Flush()
	})
	if err != nil {
		return err
	}
	for _, e := range s.entries {
		e.raw = nil
	}
	s.f.Close() // (a lazy index stays in memory for writeIndex)
	s.data, s.base = nil, base
	// The file written is the new version: keep it open for the next
	// change, as load would.
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat task-queue.json: %w", err)
	}
	s.f, s.stat = f, stampOf(fi)
	s.settled = false
	return nil
}

// writeIndex writes the index of a settled version. The index is a
// cache: when writing it fails, the next reader rebuilds it from
// task-queue.json.
func (s *state) writeIndex(dir string) {
	if s.settled {
		_ = writeIndex(filepath.Join(dir, IndexFile), s.hdr.Generation, s.stat, s.base, s.entries, s.lazy)
	}
}

// saveLazy writes the tasks when the entries are not decoded: runs of
// unchanged tasks are copied from the old file, changed ones written. It
// leaves the state fit only for writeIndex (see Queue.commit).
func (s *state) saveLazy(w *bufio.Writer, tmp *os.File) error {
	l := s.lazy
	if l.count == 0 {
		w.WriteString(tasksClose)
		return w.Flush()
	}
	r := &indexReader{b: l.data}
	off := l.base // in the old file
	runStart, runEnd := -1, -1
	flush := func() error {
		if runStart < 0 {
			return nil
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if _, err := s.f.Seek(int64(runStart), io.SeekStart); err != nil {
			return err
		}
		n, err := io.Copy(tmp, &io.LimitedReader{R: s.f, N: int64(runEnd - runStart)})
		if err != nil {
			return err
		}
		if n != int64(runEnd-runStart) {
			return fmt.Errorf("copy tasks: short copy")
		}
		runStart = -1
		return nil
	}
	for i := range l.count {
		n := skipRecord(r)
		if r.bad || n <= 0 || int64(off+n) > s.stat.size {
			return fmt.Errorf("task-queue.idx does not match task-queue.json")
		}
		if p := l.patch[i]; p != nil {
			if err := flush(); err != nil {
				return err
			}
			w.Write(p.raw)
			p.n = len(p.raw)
			if i < l.count-1 {
				w.WriteString(",\n")
			} else {
				w.WriteByte('\n')
			}
		} else {
			// The run includes the separator that follows: the old
			// file has ",\n" after every task but the last, as the new.
			if runStart < 0 {
				runStart = off
			}
			runEnd = off + n + 2
			if i == l.count-1 {
				runEnd--
			}
		}
		off += n + 2
	}
	if int64(off-1+len(tasksClose)) != s.stat.size {
		return fmt.Errorf("task-queue.idx does not match task-queue.json")
	}
	if err := flush(); err != nil {
		return err
	}
	w.WriteString(tasksClose)
	return w.Flush()
}

// replace writes path atomically: fill writes a temporary file, which is
// renamed over path. With sync, the file and the directory are synced, so
// a power loss keeps either version; without, a killed process still
// does. It returns the new file, open for reading.
func replace(path string, sync bool, fill func(*os.File) error) (*os.File, error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("replace %s: %w", path, err)
	}
	err = fill(tmp)
	if err == nil {
		err = tmp.Chmod(teamdir.FileMode)
	}
	if err == nil && sync {
		err = tmp.Sync()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil && sync {
		err = atomicfile.SyncDir(dir)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("replace %s: %w", path, err)
	}
	return tmp, nil
}

// replaceNoSync is replace without the fsyncs, closing the file.
func replaceNoSync(path string, perm os.FileMode, fill func(*os.File) error) error {
	f, err := replace(path, false, fill)
	if err != nil {
		return err
	}
	return f.Close()
}

var crcTable = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// indexReader decodes the index from one string, so ids and worker names
// are substrings of it rather than separate allocations.
type indexReader struct {
	b   string
	bad bool
	end int // where the body of the file ends (checkedIndex)
}

func (r *indexReader) uvarint() uint64 {
	var x uint64
	var sh uint
	for i := 0; i < len(r.b) && i < binary.MaxVarintLen64; i++ {
		c := r.b[i]
		if c < 0x80 {
			r.b = r.b[i+1:]
			return x | uint64(c)<<sh
		}
		x |= uint64(c&0x7f) << sh
		sh += 7
	}
	r.bad, r.b = true, ""
	return 0
}

func (r *indexReader) varint() int64 {
	ux := r.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

func (r *indexReader) str() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad, r.b = true, ""
		return ""
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *indexReader) byte() uint8 {
	if len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}
