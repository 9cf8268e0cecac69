package queue

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A task without a title is named by its prompt's first line, cut at 80
// bytes without cutting a character in two (the title is JSON: a cut
// character would be stored as U+FFFD).
func TestDefaultTitle(t *testing.T) {
	for in, want := range map[string]string{
		"  fix the build  \nthen run the tests": "fix the build",
		strings.Repeat("a", 79) + "éx":          strings.Repeat("a", 79),
		strings.Repeat("é", 50):                 strings.Repeat("é", 40),
	} {
		got := defaultTitle(in)
		if got != want || !utf8.ValidString(got) {
			t.Errorf("defaultTitle(%q) = %q, want %q", in, got, want)
		}
	}
}
