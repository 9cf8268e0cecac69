package dash

import (
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// The palette uses the 16 basic colours, which every terminal maps to its
// own theme, so the dashboard reads on dark and light backgrounds alike.
// ink is a style reduced to the escape codes around a one-line string:
// lipgloss renders a style anew on every call, which is too slow for a
// table redrawn every second; an ink is computed once.
type ink struct{ pre, post string }

func newInk(st lipgloss.Style) ink {
	r := st.Render("\x00")
	i := strings.IndexByte(r, 0)
	if i < 0 {
		return ink{}
	}
	return ink{r[:i], r[i+1:]}
}

// Render paints one line.
func (k ink) Render(s string) string {
	if s == "" || k.pre == "" {
		return s
	}
	return k.pre + s + k.post
}

var (
	stBold    = newInk(lipgloss.NewStyle().Bold(true))
	stDim     = newInk(lipgloss.NewStyle().Foreground(lipgloss.BrightBlack))
	stOK      = newInk(lipgloss.NewStyle().Foreground(lipgloss.Green))
	stBad     = newInk(lipgloss.NewStyle().Foreground(lipgloss.Red))
	stBadB    = newInk(lipgloss.NewStyle().Foreground(lipgloss.Red).Bold(true))
	stWarn    = newInk(lipgloss.NewStyle().Foreground(lipgloss.Yellow))
	stInfo    = newInk(lipgloss.NewStyle().Foreground(lipgloss.Cyan))
	stThink   = newInk(lipgloss.NewStyle().Foreground(lipgloss.Magenta).Italic(true))
	stSel     = newInk(lipgloss.NewStyle().Reverse(true))
	stTitle   = newInk(lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Blue))
	stRule    = newInk(lipgloss.NewStyle().Foreground(lipgloss.BrightBlack))
	stBarOn   = newInk(lipgloss.NewStyle().Foreground(lipgloss.Green))
	stBarOff  = newInk(lipgloss.NewStyle().Foreground(lipgloss.BrightBlack))
	stMagenta = newInk(lipgloss.NewStyle().Foreground(lipgloss.Magenta))
	stYellow  = newInk(lipgloss.NewStyle().Foreground(lipgloss.Yellow))
	stCyan    = newInk(lipgloss.NewStyle().Foreground(lipgloss.Cyan))
	stBlue    = newInk(lipgloss.NewStyle().Foreground(lipgloss.Blue))
)

func toneStyle(tone string) ink {
	switch tone {
	case "ok":
		return stOK
	case "bad":
		return stBad
	case "warn":
		return stWarn
	case "dim":
		return stDim
	case "think":
		return stThink
	case "info":
		return stInfo
	}
	return ink{}
}

// stateStyle colours a worker state.
func stateStyle(state string) ink {
	switch state {
	case "thinking":
		return stMagenta
	case "tool_call", "executing":
		return stYellow
	case "observing":
		return stCyan
	case "verify":
		return stBlue
	case "commit", "done":
		return stOK
	case "failed", "dead":
		return stBadB
	case "paused", "stale", "approval?":
		return stWarn
	}
	return stDim
}

// taskStatusStyle colours a task status.
func taskStatusStyle(s string) ink {
	switch s {
	case "claimed":
		return stYellow
	case "pending":
		return ink{}
	case "blocked":
		return stDim
	case "done":
		return stOK
	case "failed":
		return stBad
	case "cancelled":
		return stDim
	}
	return ink{}
}

// width is the display width of s; plain ASCII, the common case, is
// measured without parsing graphemes.
func width(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || c < 0x20 {
			return ansi.StringWidth(s)
		}
	}
	return len(s)
}

// cell fits s into exactly w columns: truncated with an ellipsis or padded.
// s is plain text (styles go around the cell), rendered with termtext.
func cell(s string, w int) string {
	if w <= 0 {
		return ""
	}
	s = termtext.Line(s)
	n := width(s)
	if n > w {
		return ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", w-n)
}

// rcell right-aligns s in w columns.
func rcell(s string, w int) string {
	s = termtext.Line(s)
	n := width(s)
	if n > w {
		return ansi.Truncate(s, w, "…")
	}
	return strings.Repeat(" ", w-n) + s
}

// fit truncates a line to w columns.
func fit(s string, w int) string {
	if len(s) <= w {
		return s // never wider than its bytes
	}
	if width(s) > w {
		return ansi.Truncate(s, w, "…")
	}
	return s
}

// flow lays out pieces left to right, separated by sep, wrapping to a new
// line when the next piece would pass width.
func flow(pieces []string, sep string, width int) []string {
	var lines []string
	cur, curW := "", 0
	sw := ansi.StringWidth(sep)
	for _, p := range pieces {
		if p == "" {
			continue
		}
		pw := ansi.StringWidth(p)
		switch {
		case curW == 0:
			cur, curW = p, pw
		case curW+sw+pw <= width:
			cur += sep + p
			curW += sw + pw
		default:
			lines = append(lines, fit(cur, width))
			cur, curW = p, pw
		}
	}
	if curW > 0 {
		lines = append(lines, fit(cur, width))
	}
	return lines
}

// bar draws a progress bar of w cells for a fraction 0..1.
func bar(frac float64, w int) string {
	if w < 1 {
		return ""
	}
	if frac < 0 {
		frac = 0
	}
	if frac > 1 {
		frac = 1
	}
	on := int(frac*float64(w) + 0.5)
	return stBarOn.Render(strings.Repeat("█", on)) + stBarOff.Render(strings.Repeat("░", w-on))
}

// rule is a horizontal line with an optional label.
func rule(label string, w int) string {
	if label == "" {
		return stRule.Render(strings.Repeat("─", max(w, 0)))
	}
	l := "── " + label + " "
	n := ansi.StringWidth(l)
	if n >= w {
		return stRule.Render(fit(l, w))
	}
	return stRule.Render(l + strings.Repeat("─", w-n))
}

// wrapLine wraps one plain line to w columns, hard-breaking long words.
func wrapLine(s string, w int) []string {
	if w < 1 {
		return []string{s}
	}
	if ansi.StringWidth(s) <= w {
		return []string{s}
	}
	out := strings.Split(ansi.Wrap(s, w, ""), "\n")
	return out
}
