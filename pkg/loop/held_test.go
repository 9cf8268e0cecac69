package loop

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/shell"
)

// TestServeLLMSendsWhatIsNew: against a model server that holds
// conversations, a request that extends the held one sends only its new
// messages, and neither the system prompt nor the tools while they stay
// the same; a request that does not extend it (a compacted context) or
// changes the system prompt is whole; a server that has forgotten is
// asked again with the whole request, and its not_held error is not
// shown.
func TestServeLLMSendsWhatIsNew(t *testing.T) {
	tools := []protocol.ToolDef{{Name: "echo", Description: "echo", InputSchema: []byte(`{"type":"object"}`)}}
	for _, mode := range []string{"held", "forget"} {
		log := filepath.Join(t.TempDir(), "requests.log")
		l := NewServeLLM(fakeCmd(t, "llm 4 "+mode+" "+log), os.Stderr)
		msgs := []protocol.Message{{Role: protocol.RoleUser, Content: protocol.Content{{Type: protocol.BlockText, Text: "go"}}}}
		var kinds []string
		onEvent := func(ev any) {
			if e, ok := ev.(*protocol.ErrorEvent); ok {
				kinds = append(kinds, e.Kind)
			}
		}
		ask := func(system string, msgs []protocol.Message) *protocol.EndEvent {
			t.Helper()
			end, err := l.Call(context.Background(), &protocol.Request{System: system, Tools: tools, Messages: msgs}, onEvent)
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			return end
		}
		for i := 0; i < 3; i++ {
			end := ask("be brief", msgs)
			call := end.Message.Content.ToolCalls()[0]
			msgs = append(msgs, end.Message, protocol.Message{Role: protocol.RoleTool, Content: protocol.Content{{Type: protocol.BlockToolResult, ID: call.ID, Output: "ok"}}})
		}
		ask("be briefer", msgs)
		compacted := []protocol.Message{{Role: protocol.RoleUser, Content: protocol.Content{{Type: protocol.BlockText, Text: "a summary"}}}, msgs[len(msgs)-1]}
		ask("be briefer", compacted)
		l.Close()
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		want := `after= new=1 total=1 tools=1/1 system="be brief"|` +
			`after=h1 new=1 total=3 tools=0/1 system="be brief"|` +
			`after=h2 new=1 total=5 tools=0/1 system="be brief"|` +
			`after= new=7 total=7 tools=1/1 system="be briefer"|` +
			`after= new=2 total=2 tools=1/1 system="be briefer"`
		if mode == "forget" {
			want = `after= new=1 total=1 tools=1/1 system="be brief"|` +
				`after= new=3 total=3 tools=1/1 system="be brief"|` +
				`after= new=5 total=5 tools=1/1 system="be brief"|` +
				`after= new=7 total=7 tools=1/1 system="be briefer"|` +
				`after= new=2 total=2 tools=1/1 system="be briefer"`
		}
		if got := strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "|"); got != want {
			t.Errorf("%s: the server got\n%s\nwant\n%s", mode, got, want)
		}
		if len(kinds) != 0 {
			t.Errorf("%s: error events shown: %v", mode, kinds)
		}
	}
}

// TestCoprocessesStartWhileTasksLoad: the model coprocess is started
// before the tool list (part of loading the tasks) has been read. The
// list command here waits for the model coprocess to exist, and gives up
// after 10 s; started at its first request, the model would never be.
func TestCoprocessesStartWhileTasksLoad(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "model-started")
	llm := NewServeLLM("touch "+shell.Quote(started)+" && "+fakeCmd(t, "llm 1 held"), os.Stderr)
	list := "i=0; while [ ! -e " + shell.Quote(started) + " ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; [ -e " + shell.Quote(started) + " ] && " + fakeCmd(t, "list")
	tools := NewServeTools(fakeCmd(t, "tools"), list, "", nil, os.Stderr)
	defer llm.Close()
	defer tools.Close()
	h := newHarness(t, llm, tools, "one")
	if res := h.run(t); res.State != Done || res.TasksDone != 1 {
		t.Fatalf("result %+v\n%s", res, h.out.String())
	}
}
