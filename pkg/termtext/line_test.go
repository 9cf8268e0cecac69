package termtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestOneLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"  a\n\tb  c \r\n", 0, "a b c"},
		{"abcdef", 5, "abcde…"},
		{"abcde", 5, "abcde"},
		{"aé", 2, "a…"}, // é is two bytes: never cut in two
		{"\x1b[31mred", 0, "\x1b[31mred"},
	} {
		if got := OneLine(c.in, c.max); got != c.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestFirstLine(t *testing.T) {
	for in, want := range map[string]string{
		"":                    "",
		"one":                 "one",
		"\n\n  head \nbody\n": "head ",
		"a\r\nb":              "a\r",
	} {
		if got := FirstLine(in); got != want {
			t.Errorf("FirstLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzCut(f *testing.F) {
	f.Add("héllo wörld", 2)
	f.Add("日本語", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := Cut(s, n)
		if len(got) > max(n, 0) || !strings.HasPrefix(s, got) {
			t.Fatalf("Cut(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Cut(%q, %d) = %q cut a character", s, n, got)
		}
	})
}
