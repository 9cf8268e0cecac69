package dash

import (
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// The palette uses the 16 basic colours, which every terminal maps to its
// own theme, so the dashboard reads on dark and light backgrounds alike.
var (
	stBold   = lipgloss.NewStyle().Bold(true)
	stDim    = lipgloss.NewStyle().Foreground(lipgloss.BrightBlack)
	stOK     = lipgloss.NewStyle().Foreground(lipgloss.Green)
	stBad    = lipgloss.NewStyle().Foreground(lipgloss.Red)
	stBadB   = lipgloss.NewStyle().Foreground(lipgloss.Red).Bold(true)
	stWarn   = lipgloss.NewStyle().Foreground(lipgloss.Yellow)
	stInfo   = lipgloss.NewStyle().Foreground(lipgloss.Cyan)
	stThink  = lipgloss.NewStyle().Foreground(lipgloss.Magenta).Italic(true)
	stSel    = lipgloss.NewStyle().Reverse(true)
	stTitle  = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Blue)
	stRule   = lipgloss.NewStyle().Foreground(lipgloss.BrightBlack)
	stBarOn  = lipgloss.NewStyle().Foreground(lipgloss.Green)
	stBarOff = lipgloss.NewStyle().Foreground(lipgloss.BrightBlack)
)

func toneStyle(tone string) lipgloss.Style {
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
	return lipgloss.NewStyle()
}

// stateStyle colours a worker state.
func stateStyle(state string) lipgloss.Style {
	switch state {
	case "thinking":
		return lipgloss.NewStyle().Foreground(lipgloss.Magenta)
	case "tool_call", "executing":
		return lipgloss.NewStyle().Foreground(lipgloss.Yellow)
	case "observing":
		return lipgloss.NewStyle().Foreground(lipgloss.Cyan)
	case "verify":
		return lipgloss.NewStyle().Foreground(lipgloss.Blue)
	case "commit", "done":
		return stOK
	case "failed", "dead":
		return stBadB
	case "paused", "stale":
		return stWarn
	}
	return stDim
}

// taskStatusStyle colours a task status.
func taskStatusStyle(s string) lipgloss.Style {
	switch s {
	case "claimed":
		return lipgloss.NewStyle().Foreground(lipgloss.Yellow)
	case "pending":
		return lipgloss.NewStyle()
	case "blocked":
		return stDim
	case "done":
		return stOK
	case "failed":
		return stBad
	case "cancelled":
		return stDim
	}
	return lipgloss.NewStyle()
}

// cell fits s into exactly w columns: truncated with an ellipsis or padded.
func cell(s string, w int) string {
	if w <= 0 {
		return ""
	}
	n := ansi.StringWidth(s)
	if n > w {
		return ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", w-n)
}

// rcell right-aligns s in w columns.
func rcell(s string, w int) string {
	n := ansi.StringWidth(s)
	if n > w {
		return ansi.Truncate(s, w, "…")
	}
	return strings.Repeat(" ", w-n) + s
}

// fit truncates a line to w columns.
func fit(s string, w int) string {
	if ansi.StringWidth(s) > w {
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
