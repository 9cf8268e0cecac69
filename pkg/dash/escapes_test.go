package dash

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
)

// hostile are the escapes a title or an output may carry: ESC ]0; retitles
// the terminal, ESC [2J clears it.
var hostile = []string{"\x1b]0;", "\x1b[2J"}

func checkShown(t *testing.T, what, frame string, want ...string) {
	t.Helper()
	for _, h := range hostile {
		if strings.Contains(frame, h) {
			t.Errorf("%s sends %q to the terminal", what, h)
		}
	}
	for _, w := range want {
		if !strings.Contains(frame, w) {
			t.Errorf("%s does not show %q", what, w)
		}
	}
}

// The dashboard draws task titles, ids, worker records and loop events from
// files anyone may edit: their escapes are shown, not obeyed, in the TUI
// (the task table, a task's detail, a worker's log) and in --once.
func TestTerminalEscapesAreShown(t *testing.T) {
	dir := fixtureDir(t)
	q, err := queue.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Add([]protocol.Task{{ID: "t-evil", Title: "\x1b]0;pwned\x07 evil", Prompt: "\x1b[2Jwipe"}}); err != nil {
		t.Fatal(err)
	}

	h := startHarness(t, Options{Dir: dir}, 160, 48)
	h.waitFor("retry-after")
	h.keys("tab", "tab")
	checkShown(t, "the task table", h.waitFor("tasks · 13 of 13", "evil"), "^[]0;pwned^G evil")
	h.keys("/", "e", "v", "i", "l", "enter")
	h.waitFor("filter evil")
	h.keys("enter")
	checkShown(t, "the task detail", h.waitFor("task t-evil", "wipe"), "^[]0;pwned^G evil", "^[[2Jwipe")

	var b strings.Builder
	r := Loader{Dir: dir, Host: proc.Host{Name: fixtureHost}}.Load(jsonl.Pos{}, fixtureNow)
	if err := WriteText(&b, Record(&r.Snap, fixtureNow, 0, nil)); err != nil {
		t.Fatal(err)
	}
	checkShown(t, "--once", b.String(), "^[]0;pwned^G evil")
}

// A loop's stream (pg-loop ... | pg-dash -) with escapes in the task's
// title, the model's text and a tool's output.
func TestStreamEscapesAreShown(t *testing.T) {
	stream := filepath.Join(t.TempDir(), "stream.jsonl")
	lines := `{"type":"task","ts":"2026-11-22T09:50:00Z","task":"t1","title":"\u001b]0;pwned\u0007 evil","status":"started"}
{"type":"assistant","ts":"2026-11-22T09:50:01Z","task":"t1","step":1,"text":"\u001b[2Jcleared","usage":{"input_tokens":1,"output_tokens":1,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0},"total":{"input_tokens":1,"output_tokens":1,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0}}
{"type":"tool_result","ts":"2026-11-22T09:50:02Z","task":"t1","step":1,"result":{"type":"result","id":"c1","name":"bash","ok":true,"output":"\u001b]0;owned\u0007out","error":null,"truncated":false,"duration_ms":4}}
<POWERGLIDE_DONE>
`
	if err := os.WriteFile(stream, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := startHarness(t, Options{Stream: f}, 160, 48)
	frame := h.waitFor("POWERGLIDE_DONE", "(ended)")
	checkShown(t, "the stream's log", frame, "^[]0;pwned^G evil", "^[[2Jcleared", "^[]0;owned^Gout")
}
