package dash

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/filestore"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// Liveness of a worker's process, as far as this host can tell.
const (
	AliveUnknown = iota // another host, or no pid recorded
	AliveNo             // the recorded process is gone (or the pid was reused)
	AliveYes
)

// WorkerInfo is a worker record with what the dashboard adds to it.
type WorkerInfo struct {
	protocol.Worker
	// VelocityFile is the value of worker-<n>.velocity when it exists; the
	// worker re-reads it every iteration, so it wins over the record.
	VelocityFile *float64
	Alive        int
}

// Velocity is the worker's effective velocity.
func (w WorkerInfo) Velocity() float64 {
	if w.VelocityFile != nil {
		return *w.VelocityFile
	}
	return w.Worker.Velocity
}

// IsPaused reports whether the worker is paused.
func (w WorkerInfo) IsPaused() bool {
	return w.Paused || (w.VelocityFile != nil && *w.VelocityFile == 0)
}

// Finished reports whether the worker has ended on purpose.
func (w WorkerInfo) Finished() bool {
	switch w.State {
	case "done", "failed", "exited", "stopped":
		return true
	}
	return false
}

// JournalLine is one readable line of events.jsonl.
type JournalLine struct {
	TS   time.Time
	Text string
	Tone string
}

// Problem is something wrong with a file that the dashboard shows as a
// warning and otherwise gets past.
type Problem struct {
	File string // name relative to the team dir
	Msg  string
}

// Snapshot is the team as read from its files at one moment.
type Snapshot struct {
	Team        string
	Tasks       []protocol.Task
	Archived    map[string]int // finished tasks archived out of the live file, by status
	Workers     []WorkerInfo
	QueueExists bool
	DirExists   bool
	Started     time.Time // first journal event, else earliest worker start or task
	Problems    []Problem // this load's problems with whole files
	LoadedAt    time.Time
	Budget      *protocol.TeamBudget // budget.json, when the team has a budget ledger
}

// Counts of the snapshot's tasks.
func (s *Snapshot) Counts() Counts { return CountTasks(s.Tasks).AddArchived(s.Archived) }

// Usage sums every worker's usage, earlier processes of a restarted
// worker included (its record's spent).
func (s *Snapshot) Usage() protocol.Usage {
	var u protocol.Usage
	for _, w := range s.Workers {
		u = u.Add(w.Total())
	}
	return u
}

// Task finds a task by id.
func (s *Snapshot) Task(id string) *protocol.Task {
	for i := range s.Tasks {
		if s.Tasks[i].ID == id {
			return &s.Tasks[i]
		}
	}
	return nil
}

// Elapsed is the time since the team started, at now.
func (s *Snapshot) Elapsed(now time.Time) time.Duration {
	if s.Started.IsZero() || now.Before(s.Started) {
		return 0
	}
	return now.Sub(s.Started)
}

// ETA estimates the time to finish the remaining tasks from the rate tasks
// finished so far; ok is false while there is no rate to go by.
func (s *Snapshot) ETA(now time.Time) (time.Duration, bool) {
	c := s.Counts()
	el := s.Elapsed(now)
	if c.Remaining() == 0 {
		return 0, c.Total > 0
	}
	if c.Finished() == 0 || el <= 0 {
		return 0, false
	}
	per := el / time.Duration(c.Finished())
	return per * time.Duration(c.Remaining()), true
}

// Loader reads a team. It is a value, safe to copy into a tea.Cmd.
type Loader struct {
	Dir teamdir.Dir
	// Team is the team's store; nil is the team directory Dir. A team
	// kept in files is read from them directly, tolerating what a person
	// may have broken by hand (each broken file is a problem); another
	// store is read through its interface.
	Team store.Team
	Host proc.Host // this host: only the pids of its records are checked (proc.Host.Owns)
	// Alive tells whether pid is still the process that started at start;
	// nil means proc.Matches.
	Alive func(pid int, start string) bool
}

// LoadResult is a snapshot and the journal read since the last load.
type LoadResult struct {
	Snap     Snapshot
	Journal  jsonl.Read
	JLines   []JournalLine
	JInvalid []string // errors of invalid journal lines
	First    time.Time
}

// team is the team's store.
func (l Loader) team() store.Team {
	if l.Team != nil {
		return l.Team
	}
	t, _ := filestore.Open(l.Dir.Home, filestore.Options{}).Team(l.Dir.Team)
	return t
}

// Files reports whether the team lives in its directory's files.
func (l Loader) Files() bool {
	if l.Team == nil {
		return true
	}
	_, ok := l.Team.(interface{ Dir() teamdir.Dir })
	return ok
}

// Load reads the whole team; jpos is where the journal was left (in files;
// another store's journal is followed by the model, see Model.Init).
func (l Loader) Load(jpos jsonl.Pos, now time.Time) LoadResult {
	var r LoadResult
	s := &r.Snap
	s.Team = l.Dir.Team
	s.LoadedAt = now
	ctx := context.Background()
	t := l.team()
	if l.Files() {
		l.loadFiles(s)
	} else {
		l.loadStore(ctx, t, s)
	}
	workers, errs := t.Workers().List(ctx)
	for _, err := range errs {
		s.Problems = append(s.Problems, Problem{relName(l.Dir, err), trimPath(err.Error())})
	}
	for _, w := range workers {
		wi := WorkerInfo{Worker: *w}
		v, err := t.Workers().Velocity(ctx, w.Worker)
		switch {
		case err != nil:
			s.Problems = append(s.Problems, Problem{filepath.Base(l.Dir.Velocity(w.Worker)), trimPath(err.Error())})
		case v != 1: // 1: none set, or the default set
			wi.VelocityFile = &v
		}
		if l.Host.Owns(w.Host, w.HostID) && w.PID > 0 && proc.ValidStart(w.PIDStart) {
			alive := l.Alive
			if alive == nil {
				alive = proc.Matches
			}
			if alive(w.PID, w.PIDStart) {
				wi.Alive = AliveYes
			} else {
				wi.Alive = AliveNo
			}
		}
		s.Workers = append(s.Workers, wi)
	}
	if !l.Files() {
		return r
	}
	// The journal: the first event dates the team; new lines are shown.
	if !jpos.Open {
		r.First = firstJournalTS(l.Dir.Events())
	}
	if jpos.Path == "" {
		jpos.Path = l.Dir.Events()
	}
	jr, err := jsonl.ReadFrom(jpos, 64<<10, 0)
	if err != nil {
		s.Problems = append(s.Problems, Problem{teamdir.EventsFile, trimPath(err.Error())})
	}
	r.Journal = jr
	for _, line := range jr.Lines {
		jl, err := journalLine(line)
		if err != nil {
			r.JInvalid = append(r.JInvalid, err.Error())
			continue
		}
		r.JLines = append(r.JLines, jl)
	}
	return r
}

// StartOf dates the team: the first journal event, else the earliest worker
// start, else the earliest task.
func StartOf(first time.Time, s *Snapshot) time.Time {
	if !first.IsZero() {
		return first
	}
	var t time.Time
	for _, w := range s.Workers {
		if !w.StartedAt.IsZero() && (t.IsZero() || w.StartedAt.Before(t)) {
			t = w.StartedAt
		}
	}
	if !t.IsZero() {
		return t
	}
	for _, k := range s.Tasks {
		if !k.CreatedAt.IsZero() && (t.IsZero() || k.CreatedAt.Before(t)) {
			t = k.CreatedAt
		}
	}
	return t
}

// loadFiles reads the queue and the budget from the team directory's
// files, each broken file a problem.
func (l Loader) loadFiles(s *Snapshot) {
	if st, err := os.Stat(l.Dir.Path()); err == nil && st.IsDir() {
		s.DirExists = true
	}
	b, err := atomicfile.ReadFile(l.Dir.Queue(), 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		s.Problems = append(s.Problems, Problem{teamdir.QueueFile, trimPath(err.Error())})
	default:
		s.QueueExists = true
		doc, err := DecodeQueue(b)
		if err != nil {
			s.Problems = append(s.Problems, Problem{teamdir.QueueFile, err.Error()})
		}
		markBlocked(doc.Tasks, doc.FinishedDeps)
		s.Tasks, s.Archived = doc.Tasks, doc.Archived
	}
	s.Budget = l.loadBudget(s)
}

// loadStore reads the queue and the budget through the store.
func (l Loader) loadStore(ctx context.Context, t store.Team, s *Snapshot) {
	if err := t.Exists(ctx); err == nil {
		s.DirExists = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		s.Problems = append(s.Problems, Problem{"store", err.Error()})
		return
	}
	tasks, err := t.Tasks().List(queue.ListOptions{})
	if err != nil {
		s.Problems = append(s.Problems, Problem{"tasks", err.Error()})
	}
	s.Tasks, s.QueueExists = tasks, s.DirExists
	if st, err := t.Tasks().Stats(); err == nil && st.Archived > 0 {
		// The archived tasks by status: the totals less the live ones.
		live := CountTasks(tasks)
		s.Archived = map[string]int{}
		for status, n := range map[string]int{protocol.StatusDone: st.Done - live.Done, protocol.StatusFailed: st.Failed - live.Failed, protocol.StatusCancelled: st.Cancelled - live.Cancelled} {
			if n > 0 {
				s.Archived[status] = n
			}
		}
	}
	tb, err := t.Budget().Read(ctx)
	switch {
	case err == nil:
		s.Budget = tb
	case !errors.Is(err, fs.ErrNotExist):
		s.Problems = append(s.Problems, Problem{"budget", err.Error()})
	}
}

func relName(d teamdir.Dir, err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ": "); i > 0 {
		if rel, e := filepath.Rel(d.Path(), msg[:i]); e == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return "worker"
}

func trimPath(msg string) string {
	if i := strings.Index(msg, ": "); i > 0 && strings.HasPrefix(msg, "/") {
		return msg[i+2:]
	}
	return msg
}

// FormatVelocity writes a velocity as its file holds it.
func FormatVelocity(v float64) string { return teamdir.FormatVelocity(v) }

func firstJournalTS(path string) time.Time {
	f, err := atomicfile.Open(path)
	if err != nil {
		return time.Time{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for i := 0; i < 20 && sc.Scan(); i++ {
		var head struct {
			TS time.Time `json:"ts"`
		}
		if err := unmarshalLoose(sc.Bytes(), &head); err == nil && !head.TS.IsZero() {
			return head.TS
		}
	}
	return time.Time{}
}

func journalLine(line []byte) (JournalLine, error) {
	v, err := protocol.JournalEvents.Decode(line)
	if err != nil {
		return JournalLine{}, err
	}
	switch ev := v.(type) {
	case *protocol.TaskEvent:
		jl := JournalLine{TS: ev.TS, Text: "task " + ev.Task + " " + ev.Op}
		if ev.Worker != "" {
			jl.Text += " by worker " + ev.Worker
		}
		if ev.Reason != "" {
			jl.Text += ": " + termtext.Line(ev.Reason)
		}
		switch ev.Op {
		case "complete":
			jl.Tone = "ok"
		case "fail", "expire":
			jl.Tone = "bad"
		case "release", "cancel":
			jl.Tone = "warn"
		}
		return jl, nil
	case *protocol.WorkerEvent:
		jl := JournalLine{TS: ev.TS, Text: "worker " + ev.Worker + " " + ev.Op, Tone: "dim"}
		if ev.State != "" {
			jl.Text += " " + ev.State
		}
		if ev.Reason != "" {
			jl.Text += ": " + termtext.Line(ev.Reason)
		}
		return jl, nil
	case *protocol.MonitorEvent:
		jl := JournalLine{TS: ev.TS, Text: "monitor " + ev.Action, Tone: "warn"}
		if ev.Worker != "" {
			jl.Text += " worker " + ev.Worker
		}
		if ev.Reason != "" {
			jl.Text += ": " + termtext.Line(ev.Reason)
		}
		return jl, nil
	}
	return JournalLine{}, fmt.Errorf("unexpected journal record")
}

// sortTasks orders tasks for the tasks view: by status, then as queued.
func sortTasks(tasks []protocol.Task) []protocol.Task {
	out := append([]protocol.Task(nil), tasks...)
	sort.SliceStable(out, func(i, j int) bool {
		return statusRank(StatusOf(out[i])) < statusRank(StatusOf(out[j]))
	})
	return out
}

// loadBudget reads the team budget's ledger, budget.json.
func (l Loader) loadBudget(s *Snapshot) *protocol.TeamBudget {
	b, err := atomicfile.ReadFile(l.Dir.Budget(), atomicfile.RecordLimit)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.Problems = append(s.Problems, Problem{teamdir.BudgetFile, trimPath(err.Error())})
		}
		return nil
	}
	var tb protocol.TeamBudget
	if err := json.Unmarshal(b, &tb); err != nil {
		s.Problems = append(s.Problems, Problem{teamdir.BudgetFile, err.Error()})
		return nil
	}
	return &tb
}

// BudgetLine sums up the team budget: spent, reserved by the calls in
// flight, and the budget.
func BudgetLine(tb *protocol.TeamBudget) string {
	line := fmt.Sprintf("budget: %s spent, %s reserved (%d in flight)", Cost(tb.SpentUSD), Cost(tb.ReservedUSD), len(tb.Reservations))
	if tb.BudgetUSD > 0 {
		line += fmt.Sprintf(" of %s, %s left", Cost(tb.BudgetUSD), Cost(max(0, tb.BudgetUSD-tb.SpentUSD-tb.ReservedUSD)))
	} else {
		line += ", no limit"
	}
	return line
}

// Hosts are the distinct host names of workers, in order of first
// appearance: pg-dash shows a HOST column only when there are two or
// more (a team across machines, on a PostgreSQL store).
func Hosts[W any](workers []W, host func(W) string) []string {
	var out []string
	for _, w := range workers {
		if h := host(w); h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}
