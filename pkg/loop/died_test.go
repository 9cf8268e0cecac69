package loop

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// dyingCmd is a component that dies (exit 9) in the middle of its first
// `deaths` requests, one per start, then runs the fake as `args`
// (deaths < 0: it always dies).
func dyingCmd(t *testing.T, deaths int, args string) string {
	dir := t.TempDir()
	script := filepath.Join(dir, "c.sh")
	cond := fmt.Sprintf("[ $n -lt %d ]", deaths)
	if deaths < 0 {
		cond = "true"
	}
	body := "n=$(cat " + dir + "/n 2>/dev/null || echo 0); echo $((n+1)) > " + dir + "/n\n" +
		"if " + cond + "; then read x; exit 9; fi\n" +
		fakeCmd(t, args) + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return "sh " + script
}

// A model coprocess that dies during a call (kill -9, out of memory) has
// the call made again on a fresh one; the task goes on (F6).
func TestModelCoprocessDiedMidCallIsRetried(t *testing.T) {
	llm := NewServeLLM(dyingCmd(t, 1, "llm 1"), os.Stderr)
	defer llm.Close()
	tools := NewServeTools(fakeCmd(t, "tools"), fakeCmd(t, "list"), "", nil, os.Stderr)
	defer tools.Close()
	h := newHarness(t, llm, tools, "one")
	res := h.run(t)
	if res.State != Done || res.TasksDone != 1 {
		t.Fatalf("result %+v\n%s", res, h.out.String())
	}
	if !strings.Contains(h.out.String(), "making the call again on a fresh one") {
		t.Errorf("no warning of the retried call:\n%s", h.out.String())
	}
}

// A second death of the same call ends the run, as before.
func TestModelCoprocessDyingTwiceEndsRun(t *testing.T) {
	llm := NewServeLLM(dyingCmd(t, -1, "llm 1"), os.Stderr)
	defer llm.Close()
	h := newHarness(t, llm, okTool("x"), "one")
	res := h.run(t)
	var de *DiedError
	if res.State != Failed || !errors.As(res.Err, &de) || de.Kind != "model" {
		t.Fatalf("result %+v, want the run failed by the model coprocess\n%s", res, h.out.String())
	}
}

// A tools coprocess that dies during a call gives that call an error
// result for the model, not run again; a fresh one takes the next call.
// A second death in a row ends the run.
func TestToolsCoprocessDiedMidCall(t *testing.T) {
	for _, c := range []struct {
		name   string
		deaths int
		state  State
	}{{"once", 1, Done}, {"always", -1, Failed}} {
		t.Run(c.name, func(t *testing.T) {
			llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){
				call("echo", `{"n":1}`), call("echo", `{"n":2}`), say("done"),
			}}
			tools := NewServeTools(dyingCmd(t, c.deaths, "tools"), fakeCmd(t, "list"), "", nil, os.Stderr)
			defer tools.Close()
			h := newHarness(t, llm, tools, "one")
			res := h.run(t)
			if res.State != c.state {
				t.Fatalf("result %+v, want %s\n%s", res, c.state, h.out.String())
			}
			first := llm.reqs[1].Messages[len(llm.reqs[1].Messages)-1]
			if first.Role != "tool" || len(first.Content) != 1 || !first.Content[0].IsError || first.Content[0].Output != DiedResult {
				t.Fatalf("first call's result %+v", first)
			}
			if c.state == Done {
				second := llm.reqs[2].Messages[len(llm.reqs[2].Messages)-1]
				if second.Content[0].IsError || second.Content[0].Output != `{"n":2}` {
					t.Fatalf("second call's result (a fresh coprocess) %+v", second)
				}
			} else if len(llm.reqs) != 2 {
				t.Fatalf("%d model calls after two deaths, want 2", len(llm.reqs))
			}
		})
	}
}
