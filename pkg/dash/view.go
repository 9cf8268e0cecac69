package dash

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// View draws the screen.
func (m *Model) View() tea.View {
	if !m.frameOK {
		m.frame, m.frameOK = m.Render(), true
	}
	v := tea.NewView(m.frame)
	v.AltScreen = true
	v.MouseMode = tea.MouseModeCellMotion
	v.WindowTitle = "pg-dash " + m.snap.Team
	return v
}

// Render draws the whole frame as text: exactly height lines of at most
// width columns.
func (m *Model) Render() string {
	w, h := max(m.width, 20), max(m.height, 5)
	now := m.opt.Now()
	var top []string
	switch {
	case m.view == ViewWorker:
		top = m.workerHeader(w, now)
	default:
		top = Header{Snap: &m.snap, Now: now, Stream: m.opt.Stream != nil, Ended: m.ended}.Render(w)
	}
	if warn := m.warningLine(w); warn != "" {
		top = append(top, warn)
	}
	bottom := m.bottomLines(w)
	bodyH := h - len(top) - len(bottom)
	if bodyH < 1 {
		// Too short a terminal: keep the body, drop header lines.
		top = top[:max(0, len(top)+bodyH-1)]
		bodyH = h - len(top) - len(bottom)
	}
	var body string
	switch m.view {
	case ViewOverview:
		body = m.overviewBody(w, bodyH, now)
	case ViewWorker:
		title := "log"
		if m.logFor != "" && m.opt.Stream == nil {
			title = "logs/worker-" + m.logFor + ".jsonl"
		} else if m.opt.Stream != nil {
			title = "stdin"
		}
		logBody := m.log.Render(w, bodyH-1)
		if m.logMissing && m.log.Len() == 0 {
			logBody = stDim.Render(fit("  "+title+" does not exist yet", w))
		}
		body = rule(title+" · "+m.log.position(), w) + "\n" + logBody
	case ViewTasks:
		body = m.tasksBody(w, bodyH, now)
	}
	lines := append(top, strings.Split(body, "\n")...)
	// Exactly bodyH body lines.
	want := len(top) + bodyH
	for len(lines) < want {
		lines = append(lines, "")
	}
	lines = lines[:want]
	lines = append(lines, bottom...)
	return strings.Join(lines, "\n")
}

// Header is the team's summary: counts, progress, usage and time.
type Header struct {
	Snap   *Snapshot
	Now    time.Time
	Stream bool
	Ended  bool
}

// Render draws the header at width.
func (h Header) Render(width int) []string {
	s := h.Snap
	c := s.Counts()
	name := "team " + s.Team
	if h.Stream {
		name = "stream on stdin"
		if h.Ended {
			name += " (ended)"
		}
	}
	first := []string{stTitle.Render("pg-dash") + " " + stBold.Render(name)}
	switch {
	case !h.Stream && !s.DirExists:
		first = append(first, stWarn.Render("no team directory yet"))
	case !h.Stream && !s.QueueExists:
		first = append(first, stDim.Render("no task-queue.json yet"))
	}
	first = append(first,
		stOK.Render(fmt.Sprintf("%d done", c.Done)),
		countStyle(c.Failed, stBad).Render(fmt.Sprintf("%d failed", c.Failed)),
		fmt.Sprintf("%d pending", c.Pending),
		countStyle(c.Blocked, stDim).Render(fmt.Sprintf("%d blocked", c.Blocked)),
		countStyle(c.Claimed, stWarn).Render(fmt.Sprintf("%d running", c.Claimed)),
	)
	if c.Cancelled > 0 {
		first = append(first, stDim.Render(fmt.Sprintf("%d cancelled", c.Cancelled)))
	}
	of := fmt.Sprintf("of %d", c.Total)
	if c.Archived > 0 {
		of += fmt.Sprintf(" (%d archived)", c.Archived)
	}
	first = append(first, stDim.Render(of))
	lines := flow(first, "  ", width)

	barW := min(40, max(width/4, 10))
	u := s.Usage()
	eta := "ETA –"
	if d, ok := s.ETA(h.Now); ok {
		eta = "ETA " + Age(d)
		if d == 0 {
			eta = "finished"
		}
	}
	second := []string{
		bar(c.Progress(), barW) + fmt.Sprintf(" %3.0f%%", c.Progress()*100),
		"tokens " + stBold.Render(Tokens(usageTokens(u))),
		"cost " + stBold.Render(Cost(u.CostUSD)),
		"elapsed " + Age(s.Elapsed(h.Now)),
		eta,
	}
	lines = append(lines, flow(second, "  ", width)...)
	if s.Budget != nil {
		lines = append(lines, BudgetLine(s.Budget))
	}
	return lines
}

func countStyle(n int, st ink) ink {
	if n == 0 {
		return stDim
	}
	return st
}

// warningLine sums up the problems met reading files.
func (m *Model) warningLine(w int) string {
	var msgs []string
	for _, p := range m.problems {
		msgs = append(msgs, p.File+": "+p.Msg)
	}
	for _, f := range m.warnKeys {
		lw := m.lineWarn[f]
		if lw.count == 1 {
			msgs = append(msgs, f+": "+lw.last)
		} else {
			msgs = append(msgs, fmt.Sprintf("%s: %d problems, last: %s", f, lw.count, lw.last))
		}
	}
	if len(msgs) == 0 {
		return ""
	}
	// A file that cannot be read now matters more than lines skipped
	// before: show it first.
	show := msgs[len(msgs)-1]
	if len(m.problems) > 0 {
		show = msgs[0]
	}
	s := "⚠ " + show
	if len(msgs) > 1 {
		s = fmt.Sprintf("⚠ %d warnings; %s", len(msgs), show)
	}
	return stWarn.Render(fit(termtext.Line(s), w))
}

// bottomLines are the status or confirmation line and the help bar.
func (m *Model) bottomLines(w int) []string {
	var status string
	switch {
	case m.confirm != nil:
		status = stBadB.Render(fit(fmt.Sprintf("Stop worker %s (SIGTERM to process group %d)? y/N", termtext.Line(m.confirm.worker), m.confirm.target.PID), w))
	case m.filtering:
		status = fit(m.filter.View(), w)
	case m.view != ViewTasks && m.pendingApproval() != nil:
		status = m.approvalLine(w)
	case m.status != "":
		status = toneStyle(m.statusT).Render(fit(m.status, w))
	}
	helpBar := fit(m.help.ShortHelpView(m.bindings()), w)
	if m.help.ShowAll {
		full := strings.Split(m.help.FullHelpView(m.fullBindings()), "\n")
		return append([]string{status}, full...)
	}
	return []string{status, helpBar}
}

func (m *Model) bindings() []key.Binding {
	k := m.keys
	switch {
	case m.confirm != nil:
		return []key.Binding{
			key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "stop")),
			key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "cancel")),
		}
	case m.filtering:
		return []key.Binding{
			key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "apply")),
			key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear")),
		}
	}
	ctl := []key.Binding{k.Pause, k.Faster, k.Stop}
	if m.opt.Stream != nil {
		ctl = nil
	}
	if m.view != ViewTasks && m.pendingApproval() != nil {
		ctl = append([]key.Binding{approveKey, denyKey}, ctl...)
	}
	switch m.view {
	case ViewWorker:
		// Most needed first: a narrow terminal cuts the end.
		return append(append([]key.Binding{k.Up, k.Bottom, k.Prev}, ctl...), k.Quit, k.Help, k.Tab, k.Back)
	case ViewTasks:
		if m.detail {
			return []key.Binding{k.Up, k.Back, k.Tab, k.Quit}
		}
		return []key.Binding{k.Up, k.Enter, k.Filter, k.Tab, k.Quit, k.Help}
	}
	return append(append([]key.Binding{k.Up, k.Enter, k.Tab}, ctl...), k.Quit, k.Help)
}

func (m *Model) fullBindings() [][]key.Binding {
	k := m.keys
	return [][]key.Binding{
		{k.Up, k.Down, k.PgUp, k.PgDown},
		{k.Top, k.Bottom, k.Prev, k.Next},
		{k.Enter, k.Back, k.Tab, k.Filter},
		{k.Pause, k.Faster, k.Slower, k.Stop},
		{k.Help, k.Quit},
	}
}

// overviewBody is the workers table and, when there is room, the journal.
func (m *Model) overviewBody(w, h int, now time.Time) string {
	tableH := h
	var journal []string
	if n := len(m.snap.Workers); h-n-2 >= 4 && len(m.journal) > 0 {
		jh := h - n - 2
		tableH = n + 1
		journal = JournalPanel{Lines: m.journal}.Render(w, jh)
	}
	t := WorkersTable{Workers: m.snap.Workers, Snap: &m.snap, Sel: m.sel, Now: now, Stale: m.opt.Stale}
	out := t.Render(w, tableH)
	if journal != nil {
		out += "\n\n" + strings.Join(journal, "\n")
	}
	return out
}

// WorkersTable lists the workers.
type WorkersTable struct {
	Workers []WorkerInfo
	Snap    *Snapshot
	Sel     int
	Now     time.Time
	Stale   time.Duration
}

type column struct {
	title string
	width int
	right bool
	prio  int // lower is dropped first
}

// Render draws a header row and as many rows as fit in height, keeping the
// selected row in view.
func (t WorkersTable) Render(width, height int) string {
	if len(t.Workers) == 0 {
		return stDim.Render(fit("  no workers yet (worker-<n>.json)", width))
	}
	idW := 2
	for _, w := range t.Workers {
		idW = max(idW, len(w.Worker.Worker))
	}
	idW = min(idW, 8)
	cols := []column{
		{"ID", idW, false, 9},
		{"HOST", 0, false, 1}, // only for a team on several hosts; dropped first
		{"STATE", 10, false, 9},
		{"TASK", 0, false, 8}, // flexible
		{"STEP", 5, true, 4},
		{"TOKENS", 7, true, 5},
		{"COST", 7, true, 3},
		{"BEAT", 6, true, 7},
		{"VEL", 5, true, 2},
	}
	if hosts := Hosts(t.Workers, func(w WorkerInfo) string { return w.Host }); len(hosts) > 1 {
		cols[1].width = hostWidth(hosts)
	} else {
		cols = append(cols[:1], cols[2:]...)
	}
	const minTask = 12
	// Drop low-priority columns until the rest fit.
	for {
		used := 2
		for _, c := range cols {
			used += c.width + 1
		}
		if used+minTask <= width || len(cols) <= 3 {
			for i := range cols {
				if cols[i].title == "TASK" {
					cols[i].width = max(width-used, 4)
				}
			}
			break
		}
		low := -1
		for i, c := range cols {
			if c.title != "TASK" && (low < 0 || c.prio < cols[low].prio) {
				low = i
			}
		}
		cols = append(cols[:low], cols[low+1:]...)
	}
	var b strings.Builder
	hdr := "  "
	for _, c := range cols {
		if c.right {
			hdr += rcell(c.title, c.width) + " "
		} else {
			hdr += cell(c.title, c.width) + " "
		}
	}
	b.WriteString(stDim.Render(fit(strings.TrimRight(hdr, " "), width)))
	rows := height - 1
	first := 0
	if t.Sel >= rows && rows > 0 {
		first = t.Sel - rows + 1
	}
	for i := first; i < len(t.Workers) && i < first+rows; i++ {
		b.WriteString("\n")
		b.WriteString(t.row(t.Workers[i], cols, i == t.Sel, width))
	}
	return b.String()
}

// hostWidth is the HOST column's width: the longest name, 4 to 12.
func hostWidth(hosts []string) int {
	w := 4
	for _, h := range hosts {
		w = max(w, width(termtext.Line(h)))
	}
	return min(w, 12)
}

func (t WorkersTable) row(w WorkerInfo, cols []column, sel bool, width int) string {
	age := t.Now.Sub(w.HeartbeatAt)
	stale := !w.HeartbeatAt.IsZero() && (age > t.Stale || w.BeatFuture(t.Now)) && !w.Finished()
	state := w.State
	switch {
	case w.Alive == AliveNo && !w.Finished():
		state = "dead"
	case waitsForApproval(w):
		state = "approval?"
	case w.IsPaused() && !w.Finished():
		state = "paused"
	}
	var b strings.Builder
	if sel {
		b.WriteString(stSel.Render("▸") + " ")
	} else {
		b.WriteString("  ")
	}
	for _, c := range cols {
		var s string
		switch c.title {
		case "ID":
			s = stBold.Render(cell(w.Worker.Worker, c.width))
		case "HOST":
			s = stDim.Render(cell(termtext.Line(w.Host), c.width))
		case "STATE":
			s = stateStyle(state).Render(cell(state, c.width))
		case "TASK":
			title := ""
			if w.Task != "" {
				title = w.Task
				if k := t.Snap.Task(w.Task); k != nil && k.Title != "" {
					title = k.Title
				}
			}
			if title == "" {
				s = stDim.Render(cell("–", c.width))
			} else {
				s = cell(termtext.Line(title), c.width)
			}
		case "STEP":
			s = rcell(fmt.Sprint(w.Step), c.width)
		case "TOKENS":
			s = rcell(Tokens(usageTokens(w.Total())), c.width)
		case "COST":
			s = rcell(Cost(w.Total().CostUSD), c.width)
		case "BEAT":
			txt := "–"
			switch {
			case w.BeatFuture(t.Now):
				txt = "future"
			case !w.HeartbeatAt.IsZero():
				txt = Age(age)
			}
			st := stDim
			if stale {
				st = stBadB
			} else if !w.HeartbeatAt.IsZero() {
				st = stOK
			}
			s = st.Render(rcell(txt, c.width))
		case "VEL":
			v := w.Velocity()
			txt := fmt.Sprintf("%g", v)
			st := stDim
			if v == 0 {
				txt, st = "0 ⏸", stWarn
			}
			s = st.Render(rcell(txt, c.width))
		}
		b.WriteString(s + " ")
	}
	row := strings.TrimRight(b.String(), " ")
	if width < 40 {
		// The layout gives the cells at most width columns, except on a
		// very narrow terminal.
		row = fit(row, width)
	}
	return row
}

// JournalPanel shows the last lines of events.jsonl.
type JournalPanel struct{ Lines []JournalLine }

// Render draws a title and the newest lines that fit in height.
func (j JournalPanel) Render(width, height int) []string {
	out := []string{rule("events.jsonl", width)}
	n := height - 1
	lines := j.Lines
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for _, l := range lines {
		out = append(out, fit(stDim.Render(l.TS.UTC().Format(time.TimeOnly))+" "+toneStyle(l.Tone).Render(termtext.Visible(l.Text)), width))
	}
	return out
}

// workerHeader summarises the shown worker above its log.
func (m *Model) workerHeader(width int, now time.Time) []string {
	w := m.selected()
	if w == nil {
		return []string{stTitle.Render("pg-dash") + " " + stDim.Render("no worker selected")}
	}
	state := w.State
	if w.Alive == AliveNo && !w.Finished() {
		state = "dead"
	} else if waitsForApproval(*w) {
		state = "approval?"
	} else if w.IsPaused() && !w.Finished() {
		state = "paused"
	}
	where := "team " + m.snap.Team
	if m.opt.Stream != nil {
		where = "stdin"
		if m.ended {
			where += " (ended)"
		}
	}
	task := "no task"
	if w.Task != "" {
		task = termtext.Line(w.Task)
		if k := m.snap.Task(w.Task); k != nil && k.Title != "" {
			task += " " + termtext.Line(k.Title)
		}
	}
	first := []string{
		stTitle.Render("pg-dash") + " " + stBold.Render("worker "+w.Worker.Worker),
		stateStyle(state).Render(state),
		stDim.Render(where),
		task,
	}
	beat := "beat –"
	if !w.HeartbeatAt.IsZero() {
		age := now.Sub(w.HeartbeatAt)
		beat = "beat " + Age(age)
		if w.BeatFuture(now) {
			beat = "beat in the future"
		}
		if (age > m.opt.Stale || w.BeatFuture(now)) && !w.Finished() {
			beat = stBadB.Render(beat + " stale")
		}
	}
	second := []string{
		fmt.Sprintf("step %d", w.Step),
		"tokens " + Tokens(usageTokens(w.Total())),
		Cost(w.Total().CostUSD),
		beat,
		fmt.Sprintf("velocity %g", w.Velocity()),
	}
	if w.PID > 0 {
		second = append(second, fmt.Sprintf("pid %d", w.PID))
	}
	if w.LastTool != "" {
		second = append(second, "last tool "+termtext.Line(w.LastTool))
	}
	if w.LastError != nil && *w.LastError != "" {
		second = append(second, stBad.Render("error: "+termtext.Line(*w.LastError)))
	}
	return append(flow(first, "  ", width), flow(second, " · ", width)...)
}

// filteredTasks applies the filter. Every word must match a task: a word
// matches when it starts a status name ("fail", "blocked", "running" for
// claimed) or appears in the id or title; "done,failed" matches either.
func (m *Model) filteredTasks() []protocol.Task {
	tasks := sortTasks(m.snap.Tasks)
	words := strings.Fields(strings.ToLower(m.filter.Value()))
	if len(words) == 0 {
		return tasks
	}
	var out []protocol.Task
	for _, t := range tasks {
		st := StatusOf(t)
		hay := strings.ToLower(t.ID + " " + t.Title)
		ok := true
		for _, w := range words {
			any := false
			for _, alt := range strings.Split(w, ",") {
				if alt == "" {
					continue
				}
				any = any || strings.HasPrefix(st, alt) || (st == "claimed" && strings.HasPrefix("running", alt)) || strings.Contains(hay, alt)
			}
			ok = ok && any
		}
		if ok {
			out = append(out, t)
		}
	}
	return out
}

func (m *Model) tasksBody(w, h int, now time.Time) string {
	tasks := m.filteredTasks()
	if m.tasksSel >= len(tasks) {
		m.tasksSel = max(len(tasks)-1, 0)
	}
	if m.detail && len(tasks) > 0 {
		return TaskDetail{Task: tasks[m.tasksSel], Top: m.detailTop}.Render(w, h)
	}
	label := fmt.Sprintf("tasks · %d of %d", len(tasks), len(m.snap.Tasks))
	if v := strings.TrimSpace(m.filter.Value()); v != "" {
		label += " · filter " + v
	}
	out := []string{rule(label, w)}
	out = append(out, TasksTable{Tasks: tasks, Sel: m.tasksSel, Now: now}.Render(w, h-1))
	return strings.Join(out, "\n")
}

// TasksTable lists tasks.
type TasksTable struct {
	Tasks []protocol.Task
	Sel   int
	Now   time.Time
}

// Render draws the tasks that fit in height around the selection.
func (t TasksTable) Render(width, height int) string {
	if len(t.Tasks) == 0 {
		return stDim.Render(fit("  no tasks", width))
	}
	idW := 4
	for _, k := range t.Tasks {
		idW = max(idW, len(k.ID))
	}
	idW = min(idW, 28)
	wide := width >= 110
	fixed := 2 + 10 + 1 + idW + 1 + 4 + 1 + 6
	if wide {
		fixed += 1 + 9
	}
	titleW := max(width-fixed-1, 8)
	hdr := "  " + cell("STATUS", 10) + " " + cell("ID", idW) + " " + cell("TITLE", titleW) + " " + rcell("TRY", 4) + " " + cell("WORKER", 6)
	if wide {
		hdr += " " + rcell("UPDATED", 9)
	}
	lines := []string{stDim.Render(fit(hdr, width))}
	rows := height - 1
	first := 0
	if t.Sel >= rows && rows > 0 {
		first = t.Sel - rows + 1
	}
	for i := first; i < len(t.Tasks) && i < first+rows; i++ {
		k := t.Tasks[i]
		st := StatusOf(k)
		mark := "  "
		if i == t.Sel {
			mark = stSel.Render("▸") + " "
		}
		worker := ""
		if k.Claim != nil {
			worker = k.Claim.Worker
		}
		tries := fmt.Sprint(k.Attempts)
		if k.MaxAttempts > 0 {
			tries += "/" + fmt.Sprint(k.MaxAttempts)
		}
		row := mark + taskStatusStyle(st).Render(cell(st, 10)) + " " + stDim.Render(cell(k.ID, idW)) + " " + cell(termtext.Line(k.Title), titleW) + " " + rcell(tries, 4) + " " + cell(worker, 6)
		if wide {
			upd := ""
			if !k.UpdatedAt.IsZero() {
				upd = Age(t.Now.Sub(k.UpdatedAt)) + " ago"
			}
			row += " " + stDim.Render(rcell(upd, 9))
		}
		lines = append(lines, fit(row, width))
	}
	return strings.Join(lines, "\n")
}

// TaskDetail shows every field of a task, its result and error.
type TaskDetail struct {
	Task protocol.Task
	Top  int
}

// Render draws the detail from line Top.
func (d TaskDetail) Render(width, height int) string {
	k := visibleTask(d.Task)
	st := StatusOf(k)
	var lines []string
	add := func(label, v string) {
		if v == "" {
			return
		}
		for i, l := range wrapLine(v, max(width-14, 10)) {
			if i == 0 {
				lines = append(lines, stDim.Render(cell(label, 13))+" "+l)
			} else {
				lines = append(lines, strings.Repeat(" ", 14)+l)
			}
		}
	}
	lines = append(lines, rule("task "+k.ID, width))
	add("title", termtext.Line(k.Title))
	add("status", taskStatusStyle(st).Render(st))
	add("priority", fmt.Sprint(k.Priority))
	tries := fmt.Sprint(k.Attempts)
	if k.MaxAttempts > 0 {
		tries += " of " + fmt.Sprint(k.MaxAttempts)
	}
	add("attempts", tries)
	if len(k.DependsOn) > 0 {
		add("depends on", strings.Join(k.DependsOn, ", "))
	}
	if len(k.Labels) > 0 {
		var ls []string
		for kk, v := range k.Labels {
			ls = append(ls, kk+"="+v)
		}
		sort.Strings(ls)
		add("labels", strings.Join(ls, " "))
	}
	add("verify", k.Verify)
	if k.Claim != nil {
		add("claim", fmt.Sprintf("worker %s, token %d, until %s", k.Claim.Worker, k.Claim.Token, k.Claim.Until.UTC().Format(time.RFC3339)))
	}
	if !k.CreatedAt.IsZero() {
		add("created", k.CreatedAt.UTC().Format(time.RFC3339))
	}
	if !k.UpdatedAt.IsZero() {
		add("updated", k.UpdatedAt.UTC().Format(time.RFC3339))
	}
	if k.Error != nil && *k.Error != "" {
		lines = append(lines, "", stBad.Render("error"))
		for _, l := range strings.Split(*k.Error, "\n") {
			lines = append(lines, wrapIndent(l, width)...)
		}
	}
	if len(k.Result) > 0 && string(k.Result) != "null" {
		lines = append(lines, "", stOK.Render("result"))
		for _, l := range strings.Split(prettyResult(k.Result), "\n") {
			lines = append(lines, wrapIndent(l, width)...)
		}
	}
	if k.Prompt != "" {
		lines = append(lines, "", stBold.Render("prompt"))
		for _, l := range strings.Split(strings.TrimSpace(k.Prompt), "\n") {
			lines = append(lines, wrapIndent(l, width)...)
		}
	}
	top := min(d.Top, max(len(lines)-height, 0))
	lines = lines[top:]
	if len(lines) > height {
		lines = lines[:height]
	}
	return strings.Join(lines, "\n")
}

// visibleTask is a copy of k whose text is safe to draw (termtext).
func visibleTask(k protocol.Task) protocol.Task {
	k.ID, k.Title, k.Prompt, k.Verify = termtext.Visible(k.ID), termtext.Visible(k.Title), termtext.Visible(k.Prompt), termtext.Visible(k.Verify)
	if k.Error != nil {
		e := termtext.Visible(*k.Error)
		k.Error = &e
	}
	deps := make([]string, len(k.DependsOn))
	for i, d := range k.DependsOn {
		deps[i] = termtext.Line(d)
	}
	k.DependsOn = deps
	labels := make(map[string]string, len(k.Labels))
	for kk, v := range k.Labels {
		labels[termtext.Line(kk)] = termtext.Line(v)
	}
	k.Labels = labels
	if k.Claim != nil {
		c := *k.Claim
		c.Worker = termtext.Line(c.Worker)
		k.Claim = &c
	}
	return k
}

func wrapIndent(l string, width int) []string {
	var out []string
	for _, w := range wrapLine(termtext.Visible(strings.ReplaceAll(l, "\t", "    ")), max(width-2, 10)) {
		out = append(out, "  "+w)
	}
	return out
}

// prettyResult shows a string result as its text, anything else as
// indented JSON.
func prettyResult(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
