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

// Words splits a plain line as sh does, and refuses every line that
// needs a shell.
func TestWords(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	for _, line := range []string{
		"pg-tool serve",
		"  /usr/bin/pg-tool   serve --parallel 4\t",
		`'/tmp/my dir/pg-tool' serve --output-dir '/tmp/x'\''s' --pass-env A,B`,
		`pg-llm serve --model "anthropic/claude-sonnet-4-5" ''`,
		`a\ b 'c'"d"e \$HOME --x=1 100% user@host:1`,
		"ünï kødé",
		"cmd 'a=b' c=d",
	} {
		words, ok := Words(line)
		if !ok {
			t.Errorf("Words(%q) refused a plain line", line)
			continue
		}
		// sh's own split: the words as set -- receives them.
		out, err := exec.Command(sh, "-c", "set -- "+line+`; for a; do printf '[%s]' "$a"; done`).Output()
		if err != nil {
			t.Fatalf("sh for %q: %v", line, err)
		}
		got := ""
		for _, w := range words {
			got += "[" + w + "]"
		}
		if got != string(out) {
			t.Errorf("Words(%q) = %s, sh reads %s", line, got, out)
		}
	}
	for _, line := range []string{
		"", "   ", "echo $HOME", "echo `id`", "a | b", "a && b", "a; b", "a > f", "a < f", "a &",
		"(a)", "{ a; }", "! a", "ls *.go", "ls ?", "ls [ab]", "cd ~", "a # comment", "X=1 a", "if true",
		"for x", "time a", "a 'open", `a "open`, `a "$x"`, "a \"`x`\"", `a "\\"`, "a \\", "a\nb", "a {b,c}",
	} {
		if words, ok := Words(line); ok {
			t.Errorf("Words(%q) = %q, want it left to a shell", line, words)
		}
	}
}
