// Package dash is pg-dash: a live view of a powerglide team (its queue,
// workers and their logs) in the terminal, or of one loop's event stream.
//
// Everything that touches a file runs in a tea.Cmd that takes values (a
// Loader, a jsonl.Pos) and returns a message; Update only folds messages into
// the model. Components are plain structs rendering at a width.
package dash

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"syscall"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/termtext"
	"github.com/powerglide/powerglide/pkg/workermark"
)

// View names.
const (
	ViewOverview = "overview"
	ViewWorker   = "worker"
	ViewTasks    = "tasks"
)

var viewOrder = []string{ViewOverview, ViewWorker, ViewTasks}

// Options configure a dashboard.
type Options struct {
	Dir    teamdir.Dir // the team, unless Stream is set: its directory on this host (logs)
	Team   store.Team  // the team's store; nil is the team directory Dir
	Stream io.Reader   // one loop's event stream (pg-dash -)
	Stale  time.Duration
	// Refresh is the polling interval when file notifications are not
	// available (or Poll forces polling).
	Refresh time.Duration
	Poll    bool
	Now     func() time.Time                 // the clock shown; tests fix it
	Host    proc.Host                        // this host: only the pids of its records are checked or signalled
	Alive   func(pid int, start string) bool // liveness check; nil means proc.Matches
	Signals *proc.Signaler                   // checks and sends the kill key's signal; nil means proc.Default
	View    string                           // the view to start in
	Worker  string                           // the worker to select first
}

// Throttles: the team is reread at most this often, a log tail more often.
const (
	minLoadInterval = 200 * time.Millisecond
	minTailInterval = 50 * time.Millisecond
	// livenessInterval is how often the team is reread with no change
	// notified, to see processes that died.
	livenessInterval = 10 * time.Second
)

// Model is the dashboard.
type Model struct {
	opt    Options
	loader Loader
	keys   keyMap
	help   help.Model

	width, height int
	view          string

	snap     Snapshot
	started  time.Time // first journal event
	journal  []JournalLine
	jpos     jsonl.Pos
	problems []Problem               // of the last load
	lineWarn map[string]*lineWarning // invalid lines, by file
	warnKeys []string

	sel        int    // selected worker index
	selID      string // its id, to keep the selection across reloads
	log        LogView
	logFor     string // the worker whose log is loaded
	logPos     jsonl.Pos
	logMissing bool
	logGen     int
	tasksSel   int
	filter     textinput.Model
	filtering  bool
	detail     bool // showing a task's detail
	detailTop  int

	confirm *confirmStop
	status  string
	statusT string // tone

	// Loading state (real time, not the shown clock).
	loading, dirty, loadTimer     bool
	lastLoad                      time.Time
	tailing, tailDirty, tailTimer bool
	lastTail                      time.Time
	polling                       bool
	pollGen                       int  // the live chain of poll ticks
	watchTrying                   bool // a watcher is being started
	watchFailed                   time.Time
	watch                         *watcher
	lastVelocity                  map[string]float64

	// Velocities written but maybe not yet seen by a load: a load started
	// before the write landed must not undo them on screen.
	velPending map[string]velPending
	// answered holds, by worker, the call a key answered: its prompt goes
	// away before the worker's record says so.
	answered map[string]string
	loadSeq  int

	frame   string // the last frame drawn, reused while frameOK
	frameOK bool

	stream *streamReader
	sstate *StreamState
	ended  bool

	jfeed *journalFeed // a store's journal, followed (nil in files)
}

type velPending struct {
	v      float64
	minSeq int // loads from this sequence number on have seen the write
}

type lineWarning struct {
	count int
	last  string
	at    time.Time // the last one, on the shown clock
}

// warnTTL is how long a file's invalid lines stay on the warning line after
// the last one: a problem that is over stops being shown.
const warnTTL = time.Minute

type confirmStop struct {
	worker string
	target proc.Target
	marked func() error // checks the worker mark again right before the signal
}

// New builds the dashboard.
func New(opt Options) *Model {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Stale <= 0 {
		opt.Stale = 30 * time.Second
	}
	if opt.Refresh <= 0 {
		opt.Refresh = time.Second
	}
	m := &Model{
		opt:          opt,
		loader:       Loader{Dir: opt.Dir, Team: opt.Team, Host: opt.Host, Alive: opt.Alive},
		keys:         newKeyMap(),
		help:         help.New(),
		view:         ViewOverview,
		lineWarn:     map[string]*lineWarning{},
		lastVelocity: map[string]float64{},
		velPending:   map[string]velPending{},
		answered:     map[string]string{},
		width:        80,
		height:       24,
		selID:        opt.Worker,
	}
	switch opt.View {
	case ViewWorker, ViewTasks:
		m.view = opt.View
	}
	m.help.ShortSeparator = "  "
	m.help.SetWidth(m.width)
	ti := textinput.New()
	ti.Prompt = "/"
	ti.Placeholder = "status or text (done failed pending blocked claimed cancelled)"
	st := ti.Styles()
	st.Cursor.Blink = false
	ti.SetStyles(st)
	ti.CharLimit = 200
	m.filter = ti
	m.filter.SetWidth(m.width - 2)
	if opt.Stream != nil {
		m.sstate = NewStreamState()
		m.snap = m.sstate.Snapshot()
		if opt.View == "" {
			m.view = ViewWorker
		}
	} else {
		m.snap.Team = opt.Dir.Team
		m.jpos = jsonl.Pos{Path: opt.Dir.Events()}
	}
	return m
}

// Messages.
type (
	loadedMsg struct {
		LoadResult
		seq int
	}
	loadTimerMsg struct{}
	tailMsg      struct {
		gen     int
		read    jsonl.Read
		err     error
		entries []*Entry
		invalid []string
	}
	tailTimerMsg struct{}
	changeMsg    struct {
		c  Changes
		ok bool
	}
	pollMsg       struct{ gen int }
	clockMsg      struct{}
	watchStartMsg struct {
		w   *watcher
		err error
	}
	actionMsg struct {
		text    string
		tone    string
		recheck bool
		worker  string // a velocity was written for this worker
	}
	streamBatchMsg streamMsg
)

// Init starts loading and watching.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{clock()}
	if m.stream == nil && m.opt.Stream != nil {
		m.stream = startStream(m.opt.Stream)
		return tea.Batch(clock(), m.readStream())
	}
	cmds = append(cmds, m.requestLoad())
	if !m.loader.Files() {
		m.jfeed = startJournal(m.loader.team())
		cmds = append(cmds, m.jfeed.next())
	}
	if m.opt.Poll || !m.loader.Files() { // another store notifies no file of its changes
		m.polling = true
		m.pollGen++
		cmds = append(cmds, m.poll())
	} else {
		dir := m.opt.Dir
		m.watchTrying = true
		cmds = append(cmds, func() tea.Msg {
			w, err := newWatcher(dir)
			return watchStartMsg{w, err}
		})
	}
	if m.view == ViewWorker {
		cmds = append(cmds, m.requestTail())
	}
	return tea.Batch(cmds...)
}

// Close releases the file watcher and the journal's follower.
func (m *Model) Close() {
	if m.watch != nil {
		m.watch.close()
	}
	if m.jfeed != nil {
		m.jfeed.close()
	}
}

func clock() tea.Cmd {
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return clockMsg{} })
}

func (m *Model) poll() tea.Cmd {
	gen := m.pollGen
	return tea.Tick(m.opt.Refresh, func(time.Time) tea.Msg { return pollMsg{gen} })
}

// watchDebounce gathers a burst of notifications into one change.
const watchDebounce = 25 * time.Millisecond

func waitWatch(w *watcher) tea.Cmd {
	return func() tea.Msg {
		c, ok := w.wait()
		if !ok {
			return changeMsg{c, ok}
		}
		time.Sleep(watchDebounce)
		more, _ := w.take()
		return changeMsg{c.merge(more), ok}
	}
}

func (m *Model) readStream() tea.Cmd {
	next := m.stream.next()
	return func() tea.Msg { return streamBatchMsg(next()) }
}

// requestLoad rereads the team now, or soon when it was just read.
func (m *Model) requestLoad() tea.Cmd {
	if m.opt.Stream != nil {
		return nil
	}
	if m.loading {
		m.dirty = true
		return nil
	}
	if wait := minLoadInterval - time.Since(m.lastLoad); wait > 0 {
		if m.loadTimer {
			return nil
		}
		m.loadTimer = true
		return tea.Tick(wait, func(time.Time) tea.Msg { return loadTimerMsg{} })
	}
	m.loading, m.dirty, m.lastLoad = true, false, time.Now()
	m.loadSeq++
	l, jpos, now, seq := m.loader, m.jpos, m.opt.Now(), m.loadSeq
	return func() tea.Msg { return loadedMsg{l.Load(jpos, now), seq} }
}

// requestTail reads what was appended to the shown worker's log.
func (m *Model) requestTail() tea.Cmd {
	if m.opt.Stream != nil {
		return nil
	}
	id := m.selectedID()
	if id == "" {
		return nil
	}
	if id != m.logFor {
		m.logFor = id
		m.logGen++
		m.log.Reset()
		m.logPos = jsonl.Pos{Path: m.opt.Dir.Log(id)}
		m.tailing = false // a read of the old log is ignored when it lands
	}
	if m.tailing {
		m.tailDirty = true
		return nil
	}
	if wait := minTailInterval - time.Since(m.lastTail); wait > 0 {
		if m.tailTimer {
			return nil
		}
		m.tailTimer = true
		return tea.Tick(wait, func(time.Time) tea.Msg { return tailTimerMsg{} })
	}
	m.tailing, m.tailDirty, m.lastTail = true, false, time.Now()
	pos, gen, now := m.logPos, m.logGen, m.opt.Now()
	return func() tea.Msg { return readLog(pos, gen, now) }
}

func readLog(pos jsonl.Pos, gen int, now time.Time) tailMsg {
	r, err := jsonl.ReadFrom(pos, tailBacklog, 0)
	msg := tailMsg{gen: gen, read: r, err: err}
	if r.Reset != "" && r.Reset != "removed" {
		msg.entries = append(msg.entries, noteEntry(now, "log "+r.Reset+": reading the new file from its start"))
	}
	for _, line := range r.Lines {
		e, err := DecodeEntry(line)
		if err != nil {
			msg.invalid = append(msg.invalid, err.Error())
			msg.entries = append(msg.entries, noteEntry(time.Time{}, "invalid line skipped: "+err.Error()))
			continue
		}
		msg.entries = append(msg.entries, e)
	}
	return msg
}

// Update folds a message into the model.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg.(type) {
	case changeMsg, loadTimerMsg, tailTimerMsg, pollMsg, watchStartMsg:
		// These only schedule reads: the frame stays as drawn.
	default:
		m.frameOK = false
	}
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.SetWidth(msg.Width)
		m.filter.SetWidth(max(msg.Width-2, 10))
		return m, nil
	case clockMsg:
		m.expireWarnings(m.opt.Now())
		// Liveness and ages change without any file changing: reread now
		// and then even when nothing was notified.
		if m.opt.Stream == nil && time.Since(m.lastLoad) > livenessInterval {
			return m, tea.Batch(clock(), m.requestLoad())
		}
		return m, clock()
	case loadedMsg:
		for i := range msg.Snap.Workers {
			w := &msg.Snap.Workers[i]
			if p, ok := m.velPending[w.Worker.Worker]; ok {
				if msg.seq >= p.minSeq {
					delete(m.velPending, w.Worker.Worker)
				} else {
					v := p.v
					w.VelocityFile = &v
				}
			}
		}
		return m, m.applyLoad(msg.LoadResult)
	case loadTimerMsg:
		m.loadTimer = false
		return m, m.requestLoad()
	case tailMsg:
		return m, m.applyTail(msg)
	case tailTimerMsg:
		m.tailTimer = false
		return m, m.requestTail()
	case watchStartMsg:
		m.watchTrying = false
		if msg.err != nil {
			m.watchFailed = time.Now()
			if m.polling {
				return m, nil
			}
			m.polling = true
			m.pollGen++
			return m, m.poll()
		}
		m.watch, m.polling = msg.w, false
		m.pollGen++ // ends the poll chain
		// Files may have changed between the first load and the watch.
		return m, tea.Batch(waitWatch(m.watch), m.requestLoad())
	case changeMsg:
		if !msg.ok {
			return m, nil
		}
		var cmds []tea.Cmd
		if msg.c.Err != nil {
			m.setStatus("file notifications failed ("+msg.c.Err.Error()+"): polling", "warn")
			m.watch.close()
			m.watch, m.polling = nil, true
			m.pollGen++
			return m, tea.Batch(m.poll(), m.requestLoad())
		}
		if msg.c.Team {
			cmds = append(cmds, m.requestLoad())
		}
		if m.logFor != "" && (msg.c.Logs["*"] || msg.c.Logs["worker-"+m.logFor+".jsonl"]) {
			cmds = append(cmds, m.requestTail())
		}
		cmds = append(cmds, waitWatch(m.watch))
		return m, tea.Batch(cmds...)
	case pollMsg:
		if msg.gen != m.pollGen || !m.polling {
			return m, nil // a chain that was replaced
		}
		cmds := []tea.Cmd{m.poll(), m.requestLoad()}
		if m.logFor != "" {
			cmds = append(cmds, m.requestTail())
		}
		return m, tea.Batch(cmds...)
	case streamBatchMsg:
		return m, m.applyStream(streamMsg(msg))
	case journalMsg:
		return m, m.applyJournal(msg)
	case actionMsg:
		m.setStatus(msg.text, msg.tone)
		if p, ok := m.velPending[msg.worker]; ok && msg.worker != "" {
			p.minSeq = m.loadSeq + 1
			m.velPending[msg.worker] = p
		}
		if msg.recheck {
			// A signalled process takes a moment to go: look again.
			return m, tea.Batch(m.requestLoad(), tea.Tick(500*time.Millisecond, func(time.Time) tea.Msg { return loadTimerMsg{} }))
		}
		return m, m.requestLoad()
	case tea.MouseWheelMsg:
		return m, m.wheel(msg)
	case tea.KeyPressMsg:
		return m, m.key(msg)
	}
	if m.filtering {
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(msg)
		return m, cmd
	}
	return m, nil
}

func (m *Model) applyLoad(r LoadResult) tea.Cmd {
	m.loading = false
	if !r.First.IsZero() {
		m.started = r.First
	}
	r.Snap.Started = StartOf(m.started, &r.Snap)
	m.snap = r.Snap
	m.problems = r.Snap.Problems
	m.jpos = r.Journal.Pos
	if r.Journal.Reset != "" && r.Journal.Reset != "removed" {
		m.journal = nil
	}
	m.journal = append(m.journal, r.JLines...)
	if len(m.journal) > 200 {
		m.journal = append([]JournalLine(nil), m.journal[len(m.journal)-100:]...)
	}
	for _, e := range r.JInvalid {
		m.warnLine(teamdir.EventsFile, e)
	}
	m.fixSelection()
	var cmds []tea.Cmd
	if m.polling && !m.opt.Poll && m.loader.Files() && r.Snap.DirExists && !m.watchTrying && time.Since(m.watchFailed) > 30*time.Second {
		// Polling because there was no directory to watch (or the watch
		// failed): try notifications again now that it is there.
		m.watchTrying = true
		dir := m.opt.Dir
		cmds = append(cmds, func() tea.Msg {
			w, err := newWatcher(dir)
			return watchStartMsg{w, err}
		})
	}
	if m.dirty || r.Journal.More {
		cmds = append(cmds, m.requestLoad())
	}
	if m.view == ViewWorker && m.selectedID() != m.logFor {
		cmds = append(cmds, m.requestTail())
	}
	return tea.Batch(cmds...)
}

func (m *Model) applyTail(msg tailMsg) tea.Cmd {
	if msg.gen != m.logGen {
		return m.requestTail()
	}
	m.tailing = false
	if msg.err != nil {
		m.warnLine("logs/worker-"+m.logFor+".jsonl", msg.err.Error())
		return nil
	}
	if msg.read.Reset != "" && msg.read.Reset != "removed" {
		m.warnLine("logs/worker-"+m.logFor+".jsonl", "log "+msg.read.Reset)
	}
	m.logPos = msg.read.Pos
	m.logMissing = msg.read.Missing
	m.log.Append(msg.entries...)
	for _, e := range msg.invalid {
		m.warnLine("logs/worker-"+m.logFor+".jsonl", e)
	}
	if m.tailDirty || msg.read.More {
		return m.requestTail()
	}
	return nil
}

func (m *Model) applyStream(msg streamMsg) tea.Cmd {
	for _, e := range msg.entries {
		m.sstate.Apply(e)
	}
	m.log.Append(msg.entries...)
	for _, e := range msg.invalid {
		m.warnLine("stdin", e)
	}
	m.snap = m.sstate.Snapshot()
	m.fixSelection()
	if msg.eof {
		m.ended = true
		if msg.err != nil {
			m.setStatus("reading stdin: "+msg.err.Error(), "bad")
		} else {
			m.setStatus("the stream ended", "dim")
		}
		return nil
	}
	return m.readStream()
}

func (m *Model) warnLine(file, msg string) {
	now := m.opt.Now()
	m.expireWarnings(now)
	w := m.lineWarn[file]
	if w == nil {
		w = &lineWarning{}
		m.lineWarn[file] = w
		m.warnKeys = append(m.warnKeys, file)
	}
	w.count++
	w.last = msg
	w.at = now
}

// expireWarnings forgets the files whose last invalid line is older than
// warnTTL.
func (m *Model) expireWarnings(now time.Time) {
	keep := m.warnKeys[:0]
	for _, f := range m.warnKeys {
		if now.Sub(m.lineWarn[f].at) > warnTTL {
			delete(m.lineWarn, f)
			continue
		}
		keep = append(keep, f)
	}
	m.warnKeys = keep
}

// setStatus shows s, on one line and with its control characters
// visible: it may quote a worker name or a host name from a record.
func (m *Model) setStatus(s, tone string) { m.status, m.statusT = termtext.Line(s), tone }

func (m *Model) fixSelection() {
	ws := m.snap.Workers
	if len(ws) == 0 {
		m.sel = 0
		return
	}
	for i, w := range ws {
		if w.Worker.Worker == m.selID {
			m.sel = i
			return
		}
	}
	if m.sel >= len(ws) {
		m.sel = len(ws) - 1
	}
	m.selID = ws[m.sel].Worker.Worker
}

func (m *Model) selectedID() string {
	if m.sel < len(m.snap.Workers) {
		return m.snap.Workers[m.sel].Worker.Worker
	}
	return ""
}

func (m *Model) selected() *WorkerInfo {
	if m.sel < len(m.snap.Workers) {
		return &m.snap.Workers[m.sel]
	}
	return nil
}

func (m *Model) moveWorker(d int) tea.Cmd {
	n := len(m.snap.Workers)
	if n == 0 {
		return nil
	}
	m.sel = min(max(m.sel+d, 0), n-1)
	m.selID = m.snap.Workers[m.sel].Worker.Worker
	if m.view == ViewWorker {
		return m.requestTail()
	}
	return nil
}

func (m *Model) setView(v string) tea.Cmd {
	m.view = v
	m.confirm = nil
	if v == ViewWorker {
		return m.requestTail()
	}
	return nil
}

func (m *Model) wheel(msg tea.MouseWheelMsg) tea.Cmd {
	up := msg.Button == tea.MouseWheelUp
	switch m.view {
	case ViewWorker:
		if up {
			m.log.ScrollBy(3)
		} else {
			m.log.ScrollBy(-3)
		}
	case ViewOverview:
		if up {
			return m.moveWorker(-1)
		}
		return m.moveWorker(1)
	case ViewTasks:
		if m.detail {
			m.detailTop = max(m.detailTop+map[bool]int{true: -3, false: 3}[up], 0)
		} else {
			m.moveTask(map[bool]int{true: -1, false: 1}[up])
		}
	}
	return nil
}

func (m *Model) key(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	// Ctrl-C quits from anywhere: the filter and the confirmation take
	// other keys as text or as an answer, never this one.
	if msg.String() == "ctrl+c" {
		return tea.Quit
	}
	if m.confirm != nil {
		c := m.confirm
		m.confirm = nil
		switch msg.String() {
		case "y", "Y":
			return stopWorker(m.loader.team(), c, m.opt.Signals)
		default:
			m.setStatus("not stopped", "dim")
			return nil
		}
	}
	if cmd, ok := m.approvalKeys(msg); ok && !m.filtering && m.view != ViewTasks {
		return cmd
	}
	if m.filtering {
		switch msg.String() {
		case "enter":
			m.filtering = false
			m.filter.Blur()
			m.tasksSel = 0
			return nil
		case "esc":
			m.filtering = false
			m.filter.Blur()
			m.filter.SetValue("")
			m.tasksSel = 0
			return nil
		}
		var cmd tea.Cmd
		m.filter, cmd = m.filter.Update(msg)
		m.tasksSel = 0
		return cmd
	}
	switch {
	case key.Matches(msg, k.Quit):
		return tea.Quit
	case key.Matches(msg, k.Help):
		m.help.ShowAll = !m.help.ShowAll
		return nil
	case key.Matches(msg, k.Tab), key.Matches(msg, k.ShiftTab):
		d := 1
		if key.Matches(msg, k.ShiftTab) {
			d = len(viewOrder) - 1
		}
		for i, v := range viewOrder {
			if v == m.view {
				m.detail = false
				return m.setView(viewOrder[(i+d)%len(viewOrder)])
			}
		}
	}
	switch m.view {
	case ViewOverview:
		switch {
		case key.Matches(msg, k.Up):
			return m.moveWorker(-1)
		case key.Matches(msg, k.Down):
			return m.moveWorker(1)
		case key.Matches(msg, k.PgUp):
			return m.moveWorker(-10)
		case key.Matches(msg, k.PgDown):
			return m.moveWorker(10)
		case key.Matches(msg, k.Enter):
			return m.setView(ViewWorker)
		}
		return m.workerKeys(msg)
	case ViewWorker:
		page := max(m.height-8, 1)
		switch {
		case key.Matches(msg, k.Up):
			m.log.ScrollBy(1)
		case key.Matches(msg, k.Down):
			m.log.ScrollBy(-1)
		case key.Matches(msg, k.PgUp):
			m.log.ScrollBy(page)
		case key.Matches(msg, k.PgDown):
			m.log.ScrollBy(-page)
		case key.Matches(msg, k.Top):
			m.log.ScrollBy(1 << 30)
		case key.Matches(msg, k.Bottom):
			m.log.Scroll = 0
		case key.Matches(msg, k.Prev):
			return m.moveWorker(-1)
		case key.Matches(msg, k.Next):
			return m.moveWorker(1)
		case key.Matches(msg, k.Back):
			return m.setView(ViewOverview)
		default:
			return m.workerKeys(msg)
		}
	case ViewTasks:
		if m.detail {
			switch {
			case key.Matches(msg, k.Up):
				m.detailTop = max(m.detailTop-1, 0)
			case key.Matches(msg, k.Down):
				m.detailTop++
			case key.Matches(msg, k.PgUp):
				m.detailTop = max(m.detailTop-10, 0)
			case key.Matches(msg, k.PgDown):
				m.detailTop += 10
			case key.Matches(msg, k.Back), key.Matches(msg, k.Enter):
				m.detail = false
			}
			return nil
		}
		switch {
		case key.Matches(msg, k.Up):
			m.moveTask(-1)
		case key.Matches(msg, k.Down):
			m.moveTask(1)
		case key.Matches(msg, k.PgUp):
			m.moveTask(-10)
		case key.Matches(msg, k.PgDown):
			m.moveTask(10)
		case key.Matches(msg, k.Top):
			m.tasksSel = 0
		case key.Matches(msg, k.Bottom):
			m.tasksSel = max(len(m.filteredTasks())-1, 0)
		case key.Matches(msg, k.Enter):
			if len(m.filteredTasks()) > 0 {
				m.detail, m.detailTop = true, 0
			}
		case key.Matches(msg, k.Filter):
			m.filtering = true
			return m.filter.Focus()
		case key.Matches(msg, k.Back):
			m.filter.SetValue("")
			m.tasksSel = 0
		}
	}
	return nil
}

func (m *Model) moveTask(d int) {
	n := len(m.filteredTasks())
	m.tasksSel = min(max(m.tasksSel+d, 0), max(n-1, 0))
}

// workerKeys handles the keys that act on the selected worker.
func (m *Model) workerKeys(msg tea.KeyPressMsg) tea.Cmd {
	k := m.keys
	if !key.Matches(msg, k.Pause, k.Faster, k.Slower, k.Stop) {
		return nil
	}
	w := m.selected()
	if w == nil {
		m.setStatus("no worker selected", "warn")
		return nil
	}
	if m.opt.Stream != nil {
		m.setStatus("a stream on stdin has no team files: nothing to control", "warn")
		return nil
	}
	id := w.Worker.Worker
	cur := w.Velocity()
	switch {
	case key.Matches(msg, k.Pause):
		if cur > 0 {
			m.lastVelocity[id] = cur
			return m.setVelocity(id, 0)
		}
		v := m.lastVelocity[id]
		if v <= 0 {
			v = w.Worker.Velocity
		}
		if v <= 0 {
			v = 1
		}
		return m.setVelocity(id, v)
	case key.Matches(msg, k.Faster):
		return m.setVelocity(id, stepVelocity(cur, +1))
	case key.Matches(msg, k.Slower):
		return m.setVelocity(id, stepVelocity(cur, -1))
	case key.Matches(msg, k.Stop):
		switch {
		case w.PID <= 0 || w.PIDStart == "":
			m.setStatus(fmt.Sprintf("worker %s has no pid recorded: nothing to stop", id), "warn")
		case !proc.ValidStart(w.PIDStart):
			m.setStatus(fmt.Sprintf("worker %s: its pid_start %q is not a start time: nothing to stop", id, w.PIDStart), "warn")
		case !m.opt.Host.Owns(w.Host, w.HostID) && w.HostID == "" && m.opt.Host.Shared:
			m.setStatus(fmt.Sprintf("worker %s's record has no host_id: on a shared store its pid is no host's to stop", id), "warn")
		case !m.opt.Host.Owns(w.Host, w.HostID):
			m.setStatus(fmt.Sprintf("worker %s runs on host %q: stop it there", id, w.Host), "warn")
		case proc.Guard(w.PID) != nil:
			// pid 1, pg-dash itself or an ancestor (a record written by
			// hand or by mistake): never signalled.
			m.setStatus(fmt.Sprintf("worker %s: %v", id, proc.Guard(w.PID)), "bad")
		case !proc.Matches(w.PID, w.PIDStart):
			m.setStatus(fmt.Sprintf("worker %s: process %d has ended or its pid was reused: nothing to stop", id, w.PID), "warn")
		case m.marked(id, w.PID, w.PIDStart) != nil:
			// The record alone does not prove the pid is the team's
			// worker: another user of a shared store may have written it.
			m.setStatus(fmt.Sprintf("not signalled: %v", m.marked(id, w.PID, w.PIDStart)), "bad")
		default:
			// Checked again when the stop is confirmed, from the
			// command's goroutine: it holds copies, not the model.
			pid, start, home, team, hostID := w.PID, w.PIDStart, m.opt.Dir.Home, m.opt.Dir.Team, m.opt.Host.ID
			m.confirm = &confirmStop{worker: id, target: proc.Target{PID: w.PID, Start: w.PIDStart, PGID: w.PGID, SID: w.SID},
				marked: func() error { return workermark.Check(home, pid, start, team, id, hostID) }}
		}
	}
	return nil
}

// marked says why the process pid (started at start) of worker id must
// not be signalled, or nil: it must carry that worker's mark in this
// dashboard's data root (package workermark).
func (m *Model) marked(id string, pid int, start string) error {
	return workermark.Check(m.opt.Dir.Home, pid, start, m.opt.Dir.Team, id, m.opt.Host.ID)
}

// velocities are the steps of + and -; p pauses (0).
var velocities = []float64{0.1, 0.25, 0.5, 1, 2, 4, 8}

func stepVelocity(cur float64, dir int) float64 {
	if dir > 0 {
		for _, v := range velocities {
			if v > cur+1e-9 {
				return v
			}
		}
		return velocities[len(velocities)-1]
	}
	for i := len(velocities) - 1; i >= 0; i-- {
		if velocities[i] < cur-1e-9 {
			return velocities[i]
		}
	}
	return velocities[0]
}

func (m *Model) setVelocity(id string, v float64) tea.Cmd {
	// Show the new velocity at once, so a second key acts on it; the next
	// load reads it back from the file.
	for i := range m.snap.Workers {
		if m.snap.Workers[i].Worker.Worker == id {
			vv := v
			m.snap.Workers[i].VelocityFile = &vv
		}
	}
	m.velPending[id] = velPending{v: v, minSeq: math.MaxInt}
	t := m.loader.team()
	return func() tea.Msg {
		if err := t.Workers().SetVelocity(context.Background(), id, v); err != nil {
			return actionMsg{text: "write velocity: " + err.Error(), tone: "bad", worker: id}
		}
		if v == 0 {
			return actionMsg{text: fmt.Sprintf("worker %s paused (velocity 0)", id), tone: "ok", worker: id}
		}
		return actionMsg{text: fmt.Sprintf("worker %s velocity %s", id, strings.TrimSpace(FormatVelocity(v))), tone: "ok", worker: id}
	}
}

// stopWorker sends SIGTERM to the worker's process group, only while its
// pid still names the process that started at the recorded time, and
// journals it in the team journal. Escalating to SIGKILL is left to
// pg-monitor, which stops a worker that outlives its heartbeat.
func stopWorker(t store.Team, c *confirmStop, sig *proc.Signaler) tea.Cmd {
	if sig == nil {
		sig = proc.Default
	}
	return func() tea.Msg {
		if err := c.marked(); err != nil {
			return actionMsg{text: fmt.Sprintf("not signalled: %v", err), tone: "bad"}
		}
		sent, err := sig.SignalGroup(c.target, syscall.SIGTERM)
		switch {
		case err != nil:
			return actionMsg{text: fmt.Sprintf("stop worker %s: %v", c.worker, err), tone: "bad"}
		case !sent:
			return actionMsg{text: fmt.Sprintf("worker %s: process %d is gone or its pid was reused: nothing signalled", c.worker, c.target.PID), tone: "warn"}
		}
		ev := protocol.WorkerEvent{Type: protocol.JournalWorker, TS: time.Now().UTC(), Worker: c.worker, Op: "stop", PID: c.target.PID,
			Reason: fmt.Sprintf("pg-dash: SIGTERM to process group %d, asked for in the dashboard (x)", c.target.PID)}
		if err := t.Journal().Append(context.Background(), ev); err != nil {
			return actionMsg{text: fmt.Sprintf("sent SIGTERM to worker %s (process group %d), but the journal: %v", c.worker, c.target.PID, err), tone: "warn", recheck: true}
		}
		return actionMsg{text: fmt.Sprintf("sent SIGTERM to worker %s (process group %d)", c.worker, c.target.PID), tone: "ok", recheck: true}
	}
}
