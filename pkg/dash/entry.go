package dash

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// Entry kinds besides the loop event types.
const (
	KindError  = "error"
	KindSignal = "signal" // <POWERGLIDE_DONE> or <POWERGLIDE_ERROR>
	KindNote   = "note"   // the dashboard's own remark (rotation, invalid line)
)

// Signals pg-loop prints as its last stdout line.
const (
	SignalDone  = "<POWERGLIDE_DONE>"
	SignalError = "<POWERGLIDE_ERROR>"
)

// Entry is one loop event made readable: a head line and body lines, plain
// text; styles are applied when rendering.
type Entry struct {
	TS   time.Time
	Kind string
	Tone string // "", "ok", "bad", "warn", "dim", "think"
	Head string
	Body []string
	Ev   any // the decoded record, nil for notes and signals

	wrapW int
	lines []string // rendered lines at wrapW
}

// Limits of what an entry shows.
const (
	maxArgLines    = 4
	maxResultLines = 6
	maxThinkLines  = 12
	maxTextLines   = 20
)

// DecodeEntry turns one line of a loop stream into an Entry. A line that is
// not a known record is returned as an error, for the caller to count.
func DecodeEntry(line []byte) (*Entry, error) {
	t := bytes.TrimSpace(line)
	switch string(t) {
	case SignalDone:
		return &Entry{Kind: KindSignal, Tone: "ok", Head: "■ " + SignalDone + " every task ended"}, nil
	case SignalError:
		return &Entry{Kind: KindSignal, Tone: "bad", Head: "■ " + SignalError + " the loop failed"}, nil
	}
	v, err := protocol.LoopEvents.Decode(t)
	if err != nil {
		return nil, err
	}
	return entryOf(v), nil
}

func entryOf(v any) *Entry {
	e := &Entry{Ev: v}
	switch ev := v.(type) {
	case *protocol.LoopStateEvent:
		e.TS, e.Kind, e.Tone = ev.TS, protocol.LoopState, "dim"
		e.Head = fmt.Sprintf("── %s → %s", orDash(ev.From), ev.To)
		if ev.Step > 0 {
			e.Head += fmt.Sprintf("  step %d", ev.Step)
		}
		if ev.Reason != "" {
			e.Head += "  (" + termtext.Line(ev.Reason) + ")"
		}
		switch ev.To {
		case "failed":
			e.Tone = "bad"
		case "done":
			e.Tone = "ok"
		}
	case *protocol.LoopAssistantEvent:
		e.TS, e.Kind = ev.TS, protocol.LoopAssistant
		e.Head = fmt.Sprintf("◇ assistant  step %d", ev.Step)
		if ev.Model != "" {
			e.Head += "  " + ev.Model
		}
		if u := ev.Usage; u.InputTokens+u.OutputTokens > 0 {
			e.Head += fmt.Sprintf("  %s in / %s out", Tokens(u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens), Tokens(u.OutputTokens))
		}
		if ev.Thinking != "" {
			for _, l := range clip(ev.Thinking, maxThinkLines) {
				e.Body = append(e.Body, "\x00think"+l)
			}
		}
		if ev.Text != "" {
			e.Body = append(e.Body, clip(ev.Text, maxTextLines)...)
		}
	case *protocol.LoopToolCallEvent:
		e.TS, e.Kind, e.Tone = ev.TS, protocol.LoopToolCall, "warn"
		e.Head = "▶ " + ev.Call.Name
		args := compactJSON(ev.Call.Input)
		if s, ok := singleArg(ev.Call.Input); ok {
			args = s
		}
		lines := clip(args, maxArgLines)
		if len(lines) == 1 {
			e.Head += " " + lines[0]
		} else {
			e.Body = lines
		}
	case *protocol.LoopToolResultEvent:
		r := ev.Result
		e.TS, e.Kind = ev.TS, protocol.LoopToolResult
		if r.OK {
			e.Tone = "ok"
			e.Head = fmt.Sprintf("◀ %s ok", r.Name)
		} else {
			e.Tone = "bad"
			e.Head = fmt.Sprintf("◀ %s failed", r.Name)
		}
		if r.DurationMS > 0 {
			e.Head += fmt.Sprintf(" %s", (time.Duration(r.DurationMS) * time.Millisecond).String())
		}
		out := r.Output
		if r.Error != nil && *r.Error != "" {
			out = *r.Error + "\n" + out
		}
		e.Body = clip(out, maxResultLines)
		if r.Truncated {
			note := "… output truncated"
			if r.FullOutput != "" {
				note += ", whole output in " + r.FullOutput
			}
			e.Body = append(e.Body, note)
		}
	case *protocol.LoopVerifyEvent:
		e.TS, e.Kind = ev.TS, protocol.LoopVerify
		if ev.OK {
			e.Tone = "ok"
			e.Head = fmt.Sprintf("✔ verify passed: %s", termtext.Line(ev.Command))
		} else {
			e.Tone = "bad"
			e.Head = fmt.Sprintf("✘ verify failed (exit %d): %s", ev.ExitCode, termtext.Line(ev.Command))
			e.Body = clip(ev.Output, maxResultLines)
		}
		if ev.Attempt > 0 {
			e.Head += fmt.Sprintf("  attempt %d", ev.Attempt)
		}
	case *protocol.LoopCommitEvent:
		e.TS, e.Kind, e.Tone = ev.TS, protocol.LoopCommit, "ok"
		if ev.Skipped {
			e.Head = "● commit skipped: nothing changed"
		} else {
			e.Head = "● commit " + termtext.Cut(ev.Hash, 10) + " " + head(ev.Message)
		}
	case *protocol.LoopLimitEvent:
		e.TS, e.Kind, e.Tone = ev.TS, protocol.LoopLimit, "bad"
		e.Head = fmt.Sprintf("■ limit %s: %s", ev.Limit, termtext.Line(ev.Reason))
	case *protocol.LoopTaskEvent:
		e.TS, e.Kind = ev.TS, protocol.LoopTask
		e.Head = fmt.Sprintf("◆ task %s %s", ev.Task, ev.Status)
		if ev.Title != "" {
			e.Head += ": " + termtext.Line(ev.Title)
		}
		if ev.Reason != "" {
			e.Head += " (" + termtext.Line(ev.Reason) + ")"
		}
		switch ev.Status {
		case "done":
			e.Tone = "ok"
		case "failed":
			e.Tone = "bad"
		}
	case *protocol.LoopLogEvent:
		e.TS, e.Kind = ev.TS, protocol.LoopLog
		e.Head = fmt.Sprintf("· %s: %s", ev.Level, head(ev.Message))
		switch ev.Level {
		case "warn":
			e.Tone = "warn"
		case "error":
			e.Tone = "bad"
		default:
			e.Tone = "dim"
		}
		e.Body = clip(rest(ev.Message), maxResultLines)
	case *protocol.LoopSummaryEvent:
		e.TS, e.Kind, e.Tone = ev.TS, protocol.LoopSummary, "ok"
		if !ev.OK {
			e.Tone = "bad"
		}
		e.Head = fmt.Sprintf("Σ %s: %d done, %d failed, %d steps, $%.4f, %.1fs (model %.1fs, tools %.1fs)", ev.Outcome, ev.Tasks.Done, ev.Tasks.Failed, ev.Steps, ev.Usage.CostUSD,
			float64(ev.WallMS)/1000, float64(ev.ModelMS)/1000, float64(ev.ToolsMS)/1000)
		if ev.Reason != "" {
			e.Body = []string{termtext.Line(ev.Reason)}
		}
	case *protocol.LoopGuardEvent:
		e.TS, e.Kind, e.Tone = ev.TS, protocol.LoopGuard, "warn"
		if ev.Action == "refused" || ev.Action == "removed" {
			e.Tone = "bad"
		}
		e.Head = fmt.Sprintf("⚠ guard %s %s %s (from %s)", ev.Action, ev.Kind, termtext.Line(ev.Match), ev.Source)
	case *protocol.ErrorEvent:
		e.Kind, e.Tone = KindError, "bad"
		e.Head = "✘ error"
		if ev.Kind != "" {
			e.Head += " " + ev.Kind
		}
		e.Head += ": " + head(ev.Message)
		e.Body = clip(rest(ev.Message), maxResultLines)
	}
	e.Head = termtext.Visible(e.Head) // names, models and ids are the record's too
	return e
}

// noteEntry is a remark of the dashboard itself in a log stream.
func noteEntry(ts time.Time, msg string) *Entry {
	return &Entry{TS: ts, Kind: KindNote, Tone: "warn", Head: "⚠ " + msg}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clip splits text into at most n lines, saying how many were left out.
func clip(s string, n int) []string {
	s = strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = termtext.Visible(strings.ReplaceAll(l, "\t", "    "))
	}
	if len(lines) > n {
		more := len(lines) - n
		lines = append(lines[:n:n], fmt.Sprintf("… %d more line%s", more, plural(more)))
	}
	return lines
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// head and rest split a message into its first line, shown with " …" when
// more follows, and the lines after it. head renders what it keeps with
// termtext, as termtext.Line does for one-line fields: a record's text may
// carry terminal escapes, to be shown, not obeyed.
func head(s string) string {
	h := termtext.Visible(termtext.FirstLine(s))
	if rest(s) != "" {
		h += " …"
	}
	return h
}

func rest(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return ""
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// singleArg shows a call whose input is one string field (bash's command,
// read's path) as that string, which reads better than JSON.
func singleArg(raw json.RawMessage) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || len(m) != 1 {
		return "", false
	}
	for k, v := range m {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return k + ": " + s, true
	}
	return "", false
}

// Tokens formats a token count: 950, 12.3k, 4.5M.
func Tokens(n int) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d", n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	default:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	}
}

// Cost formats dollars.
func Cost(usd float64) string {
	if usd < 10 {
		return fmt.Sprintf("$%.2f", usd)
	}
	return fmt.Sprintf("$%.1f", usd)
}

// Age formats a duration briefly: 4s, 3m12s, 2h05m, 3d4h.
func Age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	d = d.Truncate(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// usageTokens is the tokens a usage counts: input of every kind and output.
func usageTokens(u protocol.Usage) int {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}
