package dash

import (
	"fmt"
	"strings"
	"time"
)

// maxEntries bounds the log kept in memory; older entries are dropped.
const maxEntries = 5000

// LogView is the readable stream of one worker's loop events. It renders
// only the lines on screen, from the newest backwards, and caches each
// entry's wrapped lines per width, so a flood of events costs little.
type LogView struct {
	entries []*Entry
	// Scroll is how many lines the view is above the bottom; 0 follows
	// new events.
	Scroll  int
	Dropped int // entries dropped from the front
	width   int // the width used by Append to keep a scrolled view still
}

// Reset empties the log.
func (l *LogView) Reset() { *l = LogView{width: l.width} }

// Len is the number of entries held.
func (l *LogView) Len() int { return len(l.entries) }

// Append adds entries. A scrolled view stays on the lines it shows.
func (l *LogView) Append(es ...*Entry) {
	if len(es) == 0 {
		return
	}
	if l.Scroll > 0 && l.width > 0 {
		for _, e := range es {
			l.Scroll += len(e.render(l.width))
		}
	}
	l.entries = append(l.entries, es...)
	if len(l.entries) > maxEntries {
		drop := len(l.entries) - maxEntries*3/4
		l.Dropped += drop
		l.entries = append([]*Entry(nil), l.entries[drop:]...)
	}
}

// ScrollBy moves the view up (positive) or down (negative) by n lines.
func (l *LogView) ScrollBy(n int) {
	l.Scroll += n
	if l.Scroll < 0 {
		l.Scroll = 0
	}
}

// Render draws the last height lines (less Scroll) at width.
func (l *LogView) Render(width, height int) string {
	l.width = width
	if height <= 0 {
		return ""
	}
	if len(l.entries) == 0 {
		return stDim.Render(fit("  no events yet", width))
	}
	// Collect lines from the bottom up: skip Scroll lines, take height.
	skip := l.Scroll
	var rev []string
	i := len(l.entries) - 1
	for ; i >= 0 && len(rev) < height; i-- {
		lines := l.entries[i].render(width)
		for j := len(lines) - 1; j >= 0 && len(rev) < height; j-- {
			if skip > 0 {
				skip--
				continue
			}
			rev = append(rev, lines[j])
		}
	}
	if len(rev) < height && l.Scroll > 0 {
		// Scrolled past the top: clamp so the first line is at the top.
		total := 0
		for _, e := range l.entries {
			total += len(e.render(width))
		}
		l.Scroll = max(total-height, 0)
		return l.Render(width, height)
	}
	out := make([]string, len(rev))
	for k := range rev {
		out[len(rev)-1-k] = rev[k]
	}
	return strings.Join(out, "\n")
}

// AtTop reports whether the view shows the first entry.
func (l *LogView) AtTop(width, height int) bool {
	n := 0
	for _, e := range l.entries {
		n += len(e.render(width))
		if n > height+l.Scroll {
			return false
		}
	}
	return true
}

// render returns the entry's lines styled and wrapped at width, cached.
func (e *Entry) render(width int) []string {
	if e.wrapW == width && e.lines != nil {
		return e.lines
	}
	e.wrapW = width
	e.lines = e.lines[:0]
	stamp := "        "
	if !e.TS.IsZero() {
		stamp = e.TS.UTC().Format(time.TimeOnly)
	}
	headW := width - 9
	style := toneStyle(e.Tone)
	for k, l := range wrapLine(e.Head, max(headW, 10)) {
		prefix := stDim.Render(stamp) + " "
		if k > 0 {
			prefix = strings.Repeat(" ", 9)
		}
		e.lines = append(e.lines, fit(prefix+style.Render(l), width))
	}
	bodyW := width - 11
	for _, b := range e.Body {
		st := stDim
		if strings.HasPrefix(b, "\x00think") {
			b, st = strings.TrimPrefix(b, "\x00think"), stThink
		} else if e.Kind == "assistant" {
			st = toneStyle("")
		}
		for _, l := range wrapLine(b, max(bodyW, 10)) {
			e.lines = append(e.lines, fit(strings.Repeat(" ", 11)+st.Render(l), width))
		}
	}
	return e.lines
}

// position describes where the view is, for its title.
func (l *LogView) position() string {
	if l.Scroll == 0 {
		return fmt.Sprintf("%d events · following", len(l.entries))
	}
	return fmt.Sprintf("%d events · ↑ %d lines (G to follow)", len(l.entries), l.Scroll)
}
