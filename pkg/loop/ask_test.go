package loop

import (
	"encoding/json"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

func TestAskPatterns(t *testing.T) {
	ps, err := ParseAsk([]string{"bash:git push*", "write:*.env", "mcp__*", "term_*:rm -rf ?*"})
	if err != nil {
		t.Fatal(err)
	}
	call := func(name string, input any) protocol.ToolCall {
		b, _ := json.Marshal(input)
		return protocol.ToolCall{ID: "c", Name: name, Input: b}
	}
	for _, c := range []struct {
		call protocol.ToolCall
		want string
	}{
		{call("bash", map[string]any{"command": "git push origin main"}), "bash:git push*"},
		{call("bash", map[string]any{"command": "  git push --force  "}), "bash:git push*"},
		{call("bash", map[string]any{"command": "git pull"}), ""},
		{call("bash", map[string]any{"command": "echo git push"}), ""},
		{call("write", map[string]any{"path": "config/prod.env", "content": "x"}), "write:*.env"},
		{call("write", map[string]any{"path": "main.go", "content": "x.env"}), "write:*.env"}, // any string argument
		{call("edit", map[string]any{"path": "a.env"}), ""},
		{call("mcp__gh__create_issue", map[string]any{}), "mcp__*"},
		{call("term_send", map[string]any{"name": "sh", "text": "rm -rf /"}), "term_*:rm -rf ?*"},
		{call("term_send", map[string]any{"name": "sh", "text": "rm -rf "}), ""},
		{call("read", map[string]any{"path": "x"}), ""},
	} {
		p, ok := askMatch(ps, c.call)
		if got := map[bool]string{true: p.Text, false: ""}[ok]; got != c.want {
			t.Errorf("%s %s: matched %q, want %q", c.call.Name, c.call.Input, got, c.want)
		}
	}
	for _, bad := range []string{"", ":x", "[:x"} {
		if _, err := ParseAsk([]string{bad}); err == nil {
			t.Errorf("ParseAsk(%q): no error", bad)
		}
	}
}
