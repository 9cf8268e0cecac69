package wordcount

import "testing"

func TestCount(t *testing.T) {
	cases := map[string]int{"": 0, "one": 1, "two words": 2, "  spaced   out  ": 2, "tab\tand\nnewline": 3}
	for in, want := range cases {
		if got := Count(in); got != want {
			t.Errorf("Count(%q) = %d, want %d", in, got, want)
		}
	}
}
