// Untrusted text on a terminal: task titles, tool output, model text and
// hand-edited records may carry control sequences (ESC ]0;… retitles the
// terminal, ESC [2J clears it, others rewrite what was shown). Readable
// output renders them visibly with Visible instead; JSON output keeps the
// text exact and never comes here.

package termtext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Visible renders the control characters of s visibly and keeps the rest:
// C0 controls and DEL in caret notation as cat -v shows them (ESC is ^[,
// CR is ^M), C1 controls and the bidirectional formatting characters as
// \u009b or \u202e (a right-to-left override shows a host name or a
// title reversed), and bytes that are not UTF-8 as \x9b. Newlines and
// tabs stay as they are.
func Visible(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20:
			b.WriteByte('^')
			b.WriteByte(byte(r) + '@')
		case r == 0x7f:
			b.WriteString("^?")
		case r >= 0x80 && r < 0xa0 || bidi(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// clean reports whether s has nothing to render, the common case, without
// allocating.
func clean(s string) bool {
	ascii := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			return false
		}
		ascii = ascii && c < 0x80
	}
	if ascii {
		return true
	}
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r >= 0x80 && r < 0xa0 || bidi(r) {
			return false
		}
	}
	return true
}

// bidi reports whether r is a bidirectional formatting character: the
// embeddings, overrides and isolates, and the marks (U+061C, U+200E,
// U+200F), which reorder the text around them without showing.
func bidi(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 ||
		r == 0x200e || r == 0x200f || r == 0x061c
}
