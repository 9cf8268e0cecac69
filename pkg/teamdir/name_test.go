package teamdir

import (
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"a", true}, {"team-1.x_y", true}, {"9", true}, {strings.Repeat("a", 128), true},
		{"", false}, {".a", false}, {"-a", false}, {"_a", false}, {"a/b", false}, {"a b", false},
		{"é", false}, {strings.Repeat("a", 129), false}, {"..", false},
	} {
		if err := ValidName("team", tc.s); (err == nil) != tc.ok {
			t.Errorf("ValidName(%q) = %v, want ok=%v", tc.s, err, tc.ok)
		}
	}
}
