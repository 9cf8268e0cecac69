package pgloop

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/jq"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/loop"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// SessionsCmd lists the sessions, or shows one.
type SessionsCmd struct {
	List SessionsListCmd `cmd:"" default:"withargs" help:"List the sessions (the default: 'pg-loop sessions' is 'pg-loop sessions list')."`
	Show SessionsShowCmd `cmd:"" help:"Print one session and its transcript."`
}

// SessionsListCmd lists the sessions as JSON Lines, one session record
// each, oldest first; on a terminal, as a table.
type SessionsListCmd struct {
	JSON bool   `help:"Print JSON Lines even on a terminal."`
	Jq   string `help:"Apply a jq filter to each session record (in-process, gojq); each result is printed as a JSON line." placeholder:"EXPR"`
	Raw  bool   `short:"r" help:"With --jq, print string results as plain text, like jq -r."`
}

// Run lists the sessions.
func (c *SessionsListCmd) Run(rt *cli.Runtime) error {
	home, err := rt.Home()
	if err != nil {
		return err
	}
	filter, err := jq.New(c.Jq, c.Raw, rt.IO.Out, jsonl.NewEncoder(rt.IO.Out))
	if err != nil {
		return err
	}
	recs, errs := loop.ListSessions(home)
	for _, e := range errs {
		fmt.Fprintf(rt.IO.Err, "pg-loop: warning: %v\n", e)
	}
	if !filter.Active() && !rt.IO.JSON(c.JSON) {
		return sessionTable(rt.IO.Out, recs)
	}
	rt.JSON = true
	for _, r := range recs {
		if err := filter.Emit(rt.Ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// SessionsShowCmd prints a session record, then its transcript: one
// session_entry per record of its memory (task started and ended, each
// message of the conversation, prunes and summaries), in order.
type SessionsShowCmd struct {
	ID   string `arg:"" help:"The session's id." placeholder:"ID"`
	JSON bool   `help:"Print JSON Lines even on a terminal."`
}

// Run prints the session.
func (c *SessionsShowCmd) Run(rt *cli.Runtime) error {
	home, err := rt.Home()
	if err != nil {
		return err
	}
	s, err := loop.OpenSession(home, c.ID)
	if err != nil {
		var nf *loop.NotFoundError
		if errors.As(err, &nf) {
			return cli.Usagef("%v", err)
		}
		if strings.HasPrefix(err.Error(), "invalid session name") {
			return cli.Usagef("%v", err)
		}
		return cli.Failf("session", "%v", err)
	}
	defer s.Close()
	rec, err := s.Record()
	if err != nil {
		return cli.Failf("session", "%v", err)
	}
	if !rt.IO.JSON(c.JSON) {
		return showText(rt.IO.Out, rec, s)
	}
	rt.JSON = true
	enc := jsonl.NewEncoder(rt.IO.Out)
	if err := enc.Encode(rec); err != nil {
		return err
	}
	return s.Transcript(func(e protocol.SessionEntry) error { return enc.Encode(e) })
}

func sessionTable(w io.Writer, recs []protocol.SessionRecord) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPARENT\tSTATUS\tUPDATED\tTASKS\tTOKENS\tCOST\tCWD")
	for _, r := range recs {
		status := r.Status
		if status == "running" && !r.Alive {
			status = "running (process gone)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t$%.4f\t%s\n", r.ID, dash(r.Parent), status, r.Updated.Local().Format(time.DateTime), taskCounts(r.Tasks), r.Tokens, r.CostUSD, r.Cwd)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// taskCounts is "2 done, 1 pending", in the statuses' order.
func taskCounts(m map[string]int) string {
	var parts []string
	for _, st := range []string{protocol.StatusDone, protocol.StatusFailed, protocol.StatusClaimed, protocol.StatusPending, protocol.StatusCancelled} {
		if m[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[st], st))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// showText prints a session for people: its record, then the
// conversation.
func showText(w io.Writer, r protocol.SessionRecord, s *loop.Session) error {
	fmt.Fprintf(w, "session %s  %s  %s\n", r.ID, r.Status, r.Cwd)
	if r.Parent != "" {
		fmt.Fprintf(w, "forked from %s\n", r.Parent)
	}
	fmt.Fprintf(w, "created %s, updated %s; tasks: %s; %d steps, %d tokens, $%.4f\n\n",
		r.Created.Local().Format(time.DateTime), r.Updated.Local().Format(time.DateTime), taskCounts(r.Tasks), r.Steps, r.Tokens, r.CostUSD)
	return s.Transcript(func(e protocol.SessionEntry) error {
		ts := e.TS.Local().Format(time.TimeOnly)
		var err error
		switch e.Kind {
		case loop.MemTask:
			line := fmt.Sprintf("%s task %s %s", ts, e.Task, e.Status)
			if e.Title != "" {
				line += ": " + e.Title
			}
			if e.Follows != "" {
				line += " (follows " + e.Follows + ")"
			}
			if e.Reason != "" {
				line += ": " + e.Reason
			}
			_, err = fmt.Fprintln(w, line)
		case loop.MemMessage:
			if e.Message != nil {
				err = messageText(w, ts, e.Message)
			}
		case loop.MemSummary:
			_, err = fmt.Fprintf(w, "%s summary: %s\n", ts, termtext.OneLine(e.Summary, 400))
		case loop.MemPrune:
			_, err = fmt.Fprintf(w, "%s (older tool outputs pruned)\n", ts)
		case loop.MemFresh:
			_, err = fmt.Fprintf(w, "%s fresh start, iteration %d\n", ts, e.Iteration+1)
		case loop.MemCharge:
			if e.Usage != nil {
				_, err = fmt.Fprintf(w, "%s a failed model call charged %d tokens, $%.4f\n", ts, e.Usage.Tokens(), e.Usage.CostUSD)
			}
		}
		return err
	})
}

func messageText(w io.Writer, ts string, m *protocol.Message) error {
	for _, b := range m.Content {
		var err error
		switch b.Type {
		case protocol.BlockText:
			_, err = fmt.Fprintf(w, "%s %s: %s\n", ts, m.Role, termtext.OneLine(b.Text, 400))
		case protocol.BlockToolCall:
			_, err = fmt.Fprintf(w, "%s %s: → %s %s\n", ts, m.Role, b.Name, termtext.OneLine(string(b.Input), 200))
		case protocol.BlockToolResult:
			mark := "ok"
			if b.IsError {
				mark = "error"
			}
			_, err = fmt.Fprintf(w, "%s %s: ← %s %s\n", ts, m.Role, mark, termtext.OneLine(b.Output, 200))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
