package shell

import (
	"os/exec"
	"testing"
)

// What Quote writes, a real sh reads back as the same single word.
func TestQuoteRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	for _, s := range []string{"", "plain", "two words", "it's", "'", "''", `a\b`, "$HOME `x` $(y)", "*?[a]", "line\nbreak", "ünï"} {
		// printf repeats its format for each word: a split word would
		// lose the space between its parts, a glob would expand.
		out, err := exec.Command(sh, "-c", `printf '%s|' `+Quote(s)).Output()
		if err != nil {
			t.Fatalf("sh -c for %q: %v", s, err)
		}
		if want := s + "|"; string(out) != want {
			t.Errorf("Quote(%q) read back as %q, want %q", s, out, want)
		}
	}
}
