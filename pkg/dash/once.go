package dash

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// SnapshotRecord is the JSON form of a snapshot (`pg-dash --once --json`):
// one line, type "snapshot".
type SnapshotRecord struct {
	Type     string         `json:"type"`
	TS       time.Time      `json:"ts"`
	Team     string         `json:"team"`
	Counts   Counts         `json:"counts"`
	Progress float64        `json:"progress"`
	Usage    protocol.Usage `json:"usage"`
	ElapsedS float64        `json:"elapsed_s"`
	ETAS     *float64       `json:"eta_s"`
	Workers  []WorkerRecord `json:"workers"`
	Tasks    []TaskRecord   `json:"tasks"`
	Warnings []string       `json:"warnings"`
	Stream   *StreamRecord  `json:"stream,omitempty"`
	// Budget is the team budget's ledger (budget.json), when the team has one.
	Budget *protocol.TeamBudget `json:"budget,omitempty"`
}

// WorkerRecord is one worker in a snapshot.
type WorkerRecord struct {
	Worker        string          `json:"worker"`
	State         string          `json:"state"`
	Task          string          `json:"task,omitempty"`
	Title         string          `json:"title,omitempty"`
	Step          int             `json:"step"`
	Tokens        int             `json:"tokens" jsonschema:"description=tokens of every process of the worker (spent plus usage)"`
	CostUSD       float64         `json:"cost_usd" jsonschema:"description=cost of every process of the worker (spent plus usage)"`
	Usage         protocol.Usage  `json:"usage" jsonschema:"description=the usage of the current process"`
	Spent         *protocol.Usage `json:"spent,omitempty" jsonschema:"description=the usage of the worker's earlier processes"`
	HeartbeatAt   *time.Time      `json:"heartbeat_at"`
	HeartbeatAgeS *float64        `json:"heartbeat_age_s"`
	Stale         bool            `json:"stale"`
	Alive         *bool           `json:"alive"`
	Velocity      float64         `json:"velocity"`
	Paused        bool            `json:"paused"`
	PID           int             `json:"pid,omitempty"`
	Host          string          `json:"host,omitempty"`
	LastTool      string          `json:"last_tool,omitempty"`
	LastError     *string         `json:"last_error,omitempty"`
	// Approval is the tool call the worker waits on (pg-loop --ask).
	Approval *protocol.PendingApproval `json:"approval,omitempty"`
}

// TaskRecord is one task in a snapshot.
type TaskRecord struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Status   string `json:"status" jsonschema:"description=the task status, or blocked"`
	Attempts int    `json:"attempts"`
	Worker   string `json:"worker,omitempty"`
}

// StreamRecord describes a stream read with `pg-dash - --once`.
type StreamRecord struct {
	Events  int    `json:"events"`
	Invalid int    `json:"invalid"`
	Ended   string `json:"ended,omitempty"`
}

// Warnings lists the problems of a load as text.
func (r LoadResult) Warnings() []string {
	var out []string
	for _, p := range r.Snap.Problems {
		out = append(out, p.File+": "+p.Msg)
	}
	for _, e := range r.JInvalid {
		out = append(out, "events.jsonl: "+e)
	}
	return out
}

// Record builds the JSON form of s at now.
func Record(s *Snapshot, now time.Time, stale time.Duration, warnings []string) SnapshotRecord {
	c := s.Counts()
	rec := SnapshotRecord{
		Type: "snapshot", TS: now.UTC(), Team: s.Team, Counts: c, Progress: c.Progress(),
		Usage: s.Usage(), ElapsedS: s.Elapsed(now).Seconds(),
		Workers: []WorkerRecord{}, Tasks: []TaskRecord{}, Warnings: warnings, Budget: s.Budget,
	}
	if rec.Warnings == nil {
		rec.Warnings = []string{}
	}
	if d, ok := s.ETA(now); ok {
		v := d.Seconds()
		rec.ETAS = &v
	}
	for _, w := range s.Workers {
		wr := WorkerRecord{
			Worker: w.Worker.Worker, State: w.State, Task: w.Task, Step: w.Step,
			Tokens: usageTokens(w.Total()), CostUSD: w.Total().CostUSD, Usage: w.Usage, Spent: w.Spent,
			Velocity: w.Velocity(), Paused: w.IsPaused(), PID: w.PID, Host: w.Host, Approval: w.Approval,
			LastTool: w.LastTool, LastError: w.LastError,
		}
		if k := s.Task(w.Task); k != nil {
			wr.Title = k.Title
		}
		if !w.HeartbeatAt.IsZero() {
			t := w.HeartbeatAt.UTC()
			age := now.Sub(w.HeartbeatAt).Seconds()
			wr.HeartbeatAt, wr.HeartbeatAgeS = &t, &age
			wr.Stale = (now.Sub(w.HeartbeatAt) > stale || w.BeatFuture(now)) && !w.Finished()
		}
		if w.Alive != AliveUnknown {
			a := w.Alive == AliveYes
			wr.Alive = &a
		}
		rec.Workers = append(rec.Workers, wr)
	}
	for _, k := range sortTasks(s.Tasks) {
		tr := TaskRecord{ID: k.ID, Title: k.Title, Status: StatusOf(k), Attempts: k.Attempts}
		if k.Claim != nil {
			tr.Worker = k.Claim.Worker
		}
		rec.Tasks = append(rec.Tasks, tr)
	}
	return rec
}

// WriteJSON writes the snapshot as one JSON line.
func WriteJSON(w io.Writer, rec SnapshotRecord) error {
	return jsonl.NewEncoder(w).Encode(rec)
}

// WriteText writes a plain-text snapshot: no colours, columns aligned with
// spaces, for files, pipes and tests.
func WriteText(w io.Writer, rec SnapshotRecord) error {
	var b strings.Builder
	c := rec.Counts
	what := "team " + rec.Team
	if rec.Stream != nil {
		what = "stream on stdin"
	}
	fmt.Fprintf(&b, "%s: %d task%s", what, c.Total, plural(c.Total))
	if c.Archived > 0 {
		fmt.Fprintf(&b, " (%d archived)", c.Archived)
	}
	fmt.Fprintf(&b, ", %d done, %d failed, %d pending, %d blocked, %d running", c.Done, c.Failed, c.Pending, c.Blocked, c.Claimed)
	if c.Cancelled > 0 {
		fmt.Fprintf(&b, ", %d cancelled", c.Cancelled)
	}
	fmt.Fprintf(&b, " (%.0f%%)\n", rec.Progress*100)
	eta := "unknown"
	if rec.ETAS != nil {
		eta = Age(time.Duration(*rec.ETAS * float64(time.Second)))
		if c.Remaining() == 0 {
			eta = "finished"
		}
	}
	fmt.Fprintf(&b, "tokens %s, cost %s, elapsed %s, ETA %s\n", Tokens(usageTokens(rec.Usage)), Cost(rec.Usage.CostUSD), Age(time.Duration(rec.ElapsedS*float64(time.Second))), eta)
	if rec.Budget != nil {
		b.WriteString(BudgetLine(rec.Budget) + "\n")
	}
	if rec.Stream != nil {
		fmt.Fprintf(&b, "%d events, %d invalid line%s", rec.Stream.Events, rec.Stream.Invalid, plural(rec.Stream.Invalid))
		if rec.Stream.Ended != "" {
			fmt.Fprintf(&b, ", ended: %s", rec.Stream.Ended)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	if len(rec.Workers) == 0 {
		b.WriteString("no workers\n")
	} else {
		// HOST only when the team runs on more than one.
		manyHosts := len(Hosts(rec.Workers, func(w WorkerRecord) string { return w.Host })) > 1
		if manyHosts {
			fmt.Fprintln(tw, "WORKER\tHOST\tSTATE\tTASK\tSTEP\tTOKENS\tCOST\tBEAT\tVELOCITY")
		} else {
			fmt.Fprintln(tw, "WORKER\tSTATE\tTASK\tSTEP\tTOKENS\tCOST\tBEAT\tVELOCITY")
		}
		for _, wr := range rec.Workers {
			state := wr.State
			switch {
			case wr.Alive != nil && !*wr.Alive && !finishedState(wr.State):
				state = "dead"
			case wr.Approval != nil && !finishedState(wr.State):
				state = "approval?"
			case wr.Paused && !finishedState(wr.State):
				state = "paused"
			}
			// Every cell is one line: a record's newline would print a
			// row of its own making.
			state = termtext.Line(state)
			task := "-"
			if wr.Task != "" {
				task = termtext.Line(wr.Task)
				if wr.Title != "" {
					task += " " + termtext.Line(wr.Title)
				}
			}
			beat := "-"
			if wr.HeartbeatAgeS != nil {
				beat = Age(time.Duration(*wr.HeartbeatAgeS * float64(time.Second)))
				if wr.Stale {
					beat += " STALE"
				}
			}
			worker := termtext.Line(wr.Worker)
			if manyHosts {
				// Cut as the live view cuts its HOST column, wider: a
				// long name must not widen every row.
				host := termtext.Cut(termtext.Line(wr.Host), onceHostWidth)
				if host == "" {
					host = "-"
				}
				worker += "\t" + host
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%g\n", worker, state, termtext.Cut(task, 60), wr.Step, Tokens(wr.Tokens), Cost(wr.CostUSD), beat, wr.Velocity)
		}
		tw.Flush()
	}
	b.WriteString("\n")
	if len(rec.Tasks) == 0 {
		b.WriteString("no tasks\n")
	} else {
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "STATUS\tID\tTITLE\tTRIES\tWORKER")
		for _, t := range rec.Tasks {
			worker := t.Worker
			if worker == "" {
				worker = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", t.Status, t.ID, termtext.Cut(termtext.Line(t.Title), 60), t.Attempts, worker)
		}
		tw.Flush()
	}
	if len(rec.Warnings) > 0 {
		b.WriteString("\nwarnings:\n")
		for _, w := range rec.Warnings {
			b.WriteString("  " + termtext.Line(w) + "\n")
		}
	}
	// Ids, names and titles come from files anyone may edit: their
	// control characters are shown, not sent to the terminal.
	_, err := io.WriteString(w, termtext.Visible(b.String()))
	return err
}

func finishedState(s string) bool {
	return WorkerInfo{Worker: protocol.Worker{State: s}}.Finished()
}

// WriteEntries writes log entries as plain text, one event per block.
func WriteEntries(w io.Writer, es []*Entry) error {
	var b strings.Builder
	for _, e := range es {
		stamp := "        "
		if !e.TS.IsZero() {
			stamp = e.TS.UTC().Format(time.TimeOnly)
		}
		b.WriteString(stamp + " " + e.Head + "\n")
		for _, l := range e.Body {
			b.WriteString("           " + strings.TrimPrefix(l, "\x00think") + "\n")
		}
	}
	_, err := io.WriteString(w, termtext.Visible(b.String()))
	return err
}

// onceHostWidth is as much of a host name as a --once row shows, in bytes.
const onceHostWidth = 32
