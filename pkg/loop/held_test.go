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
// messages; a request that does not (a compacted context) is whole; a
// server that has forgotten is asked again with the whole request, and its
// not_held error is not shown.
func TestServeLLMSendsWhatIsNew(t *testing.T) {
	for _, mode := range []string{"held", "forget"} {
		log := filepath.Join(t.TempDir(), "requests.log")
		l := NewServeLLM(fakeCmd(t, "llm 3 "+mode+" "+log), os.Stderr)
		msgs := []protocol.Message{{Role: protocol.RoleUser, Content: protocol.Content{{Type: protocol.BlockText, Text: "go"}}}}
		var kinds []string
		onEvent := func(ev any) {
			if e, ok := ev.(*protocol.ErrorEvent); ok {
				kinds = append(kinds, e.Kind)
			}
		}
		for i := 0; i < 3; i++ {
			end, err := l.Call(context.Background(), &protocol.Request{Messages: msgs}, onEvent)
			if err != nil {
				t.Fatalf("%s: call %d: %v", mode, i, err)
			}
			call := end.Message.Content.ToolCalls()[0]
			msgs = append(msgs, end.Message, protocol.Message{Role: protocol.RoleTool, Content: protocol.Content{{Type: protocol.BlockToolResult, ID: call.ID, Output: "ok"}}})
		}
		compacted := []protocol.Message{{Role: protocol.RoleUser, Content: protocol.Content{{Type: protocol.BlockText, Text: "a summary"}}}, msgs[len(msgs)-1]}
		if _, err := l.Call(context.Background(), &protocol.Request{Messages: compacted}, onEvent); err != nil {
			t.Fatal(err)
		}
		l.Close()
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		want := "after= new=1 total=1|after=h1 new=1 total=3|after=h2 new=1 total=5|after= new=2 total=2"
		if mode == "forget" {
			want = "after= new=1 total=1|after= new=3 total=3|after= new=5 total=5|after= new=2 total=2"
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
