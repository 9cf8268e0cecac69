package termtext

import (
	"strings"
	"unicode/utf8"
)

// Line is Visible for one line of a table or a status line: runs of white
// space, newlines and tabs included, become one space, and the ends are
// trimmed.
func Line(s string) string {
	return Visible(OneLine(s, 0))
}

// OneLine folds s onto one line for a message or a readable event: every
// run of white space, line breaks included, becomes one space and the ends
// are trimmed. Past max bytes (when max > 0) it is cut at a character
// boundary and ends in "…". Control characters are kept: JSON output
// carries the result exactly, and readable output renders it with Visible.
func OneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if max > 0 && len(s) > max {
		s = Cut(s, max) + "…"
	}
	return s
}

// FirstLine is the first line of s, white space trimmed from both ends of
// s first (a message that starts with a blank line still has a head).
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Cut keeps at most n bytes of s, never cutting a character in two.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
