package protocol_test

import (
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// TestToolResultText: the text a model sees puts a failure's error before
// the output and names the file of a cut output.
func TestToolResultText(t *testing.T) {
	e := "exit status 1"
	for _, tc := range []struct {
		name string
		res  protocol.ToolResult
		want string
	}{
		{"ok", protocol.ToolResult{OK: true, Output: "hi\n"}, "hi\n"},
		{"error only", protocol.ToolResult{Error: &e}, "exit status 1"},
		{"error and output", protocol.ToolResult{Error: &e, Output: "FAIL x"}, "exit status 1\nFAIL x"},
		{"cut", protocol.ToolResult{OK: true, Output: "head...tail", Truncated: true, FullOutput: "/tmp/o"}, "head...tail\n[output truncated; the whole output is in /tmp/o]"},
		{"cut without a file", protocol.ToolResult{OK: true, Output: "head...tail", Truncated: true}, "head...tail"},
	} {
		if got := tc.res.Text(); got != tc.want {
			t.Errorf("%s: Text() = %q, want %q", tc.name, got, tc.want)
		}
	}
}
