package loop

import (
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// A tool call's bound by its own timeout, which the worker record gives
// pg-monitor as busy_until (F13).
func TestCallBound(t *testing.T) {
	for _, c := range []struct {
		name, input string
		want        time.Duration
	}{
		{"bash", `{"command":"make"}`, 2 * time.Minute},
		{"bash", `{"command":"make","timeout_ms":600000}`, 10 * time.Minute},
		{"term_read", `{"name":"t","timeout_ms":5000}`, 5 * time.Second},
		{"mcp__db__query", `{}`, 10 * time.Minute},
		{"bash", `{"timeout_ms":-5}`, 2 * time.Minute},
		{"bash", `{"timeout_ms":1e300}`, 2 * time.Minute},
		{"bash", `not json`, 2 * time.Minute},
	} {
		if got := callBound(protocol.ToolCall{Name: c.name, Input: []byte(c.input)}); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.name, c.input, got, c.want)
		}
	}
}
