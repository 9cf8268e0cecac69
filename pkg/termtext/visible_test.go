package termtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestVisible(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"fix the flaky test", "fix the flaky test"},
		{"héllo ✓ 日本", "héllo ✓ 日本"},
		{"a\tb\nc", "a\tb\nc"},
		{"\x1b]0;pwned\x07title", "^[]0;pwned^Gtitle"},
		{"\x1b[2Jcleared", "^[[2Jcleared"},
		{"over\rwrite", "over^Mwrite"},
		{"nul\x00 del\x7f", "nul^@ del^?"},
		{"c1 \u009b2J", `c1 \u009b2J`},
		{"raw \x9b2J", `raw \x9b2J`},
		{"^[ stays", "^[ stays"},
		{"boxB\u202eevil", `boxB\u202eevil`},
		{"iso\u2066late\u2069 mark\u200f", `iso\u2066late\u2069 mark\u200f`},
		{"emoji 👩\u200d💻 kept", "emoji 👩\u200d💻 kept"},
	} {
		if got := Visible(c.in); got != c.want {
			t.Errorf("Visible(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestLine(t *testing.T) {
	if got := Line("  two\nlines\tand \x1b[31mred  "); got != "two lines and ^[[31mred" {
		t.Errorf("Line: %q", got)
	}
}

// Whatever goes in, what comes out has no control character but newline
// and tab, is valid UTF-8, and renders again to itself.
func FuzzVisible(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]0;x\x07", "\u0085", "\xff\xfe", "a\r\nb", "\u202eevil"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := Visible(s)
		if !utf8.ValidString(v) {
			t.Fatalf("Visible(%q) = %q: not UTF-8", s, v)
		}
		for _, r := range v {
			if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r < 0xa0) || bidi(r) {
				t.Fatalf("Visible(%q) = %q keeps control %U", s, v, r)
			}
		}
		if Visible(v) != v {
			t.Fatalf("Visible is not idempotent on %q", s)
		}
		if l := Line(s); strings.ContainsAny(l, "\n\t") {
			t.Fatalf("Line(%q) = %q", s, l)
		}
	})
}

// The dashboard renders every title and log line through Visible each
// frame: clean text, the common case, must cost next to nothing.
func BenchmarkVisible(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"clean-ascii", strings.Repeat("fix the flaky test in pkg/queue ", 4)},
		{"clean-utf8", strings.Repeat("héllo ✓ 日本 ", 8)},
		{"escapes", strings.Repeat("\x1b]0;pwned\x07 \x1b[2J", 8)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Visible(c.s)
			}
		})
	}
}
