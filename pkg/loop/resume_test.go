package loop

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// resumeHarness is a harness whose session memory holds recs, resumed.
func resumeHarness(t *testing.T, llm LLM, tools Tools, recs []MemoryRecord, tasks ...string) *harness {
	t.Helper()
	h := newHarness(t, llm, tools, tasks...)
	for i := range recs {
		recs[i].TS = time.Now()
	}
	if err := h.sess.Append(recs...); err != nil {
		t.Fatal(err)
	}
	rp, err := h.sess.LoadReplay()
	if err != nil {
		t.Fatal(err)
	}
	h.opts.Resume = rp
	return h
}

func text(role, s string) *protocol.Message {
	return &protocol.Message{Role: role, Content: protocol.Content{{Type: protocol.BlockText, Text: s}}}
}

// checkTurns fails t unless conv is what a provider accepts: it starts
// with the user, every tool call is answered by the next message, and it
// ends with the user's turn (tool results are the user's).
func checkTurns(t *testing.T, conv []protocol.Message) {
	t.Helper()
	if len(conv) == 0 || conv[0].Role != protocol.RoleUser {
		t.Fatalf("the conversation does not start with the user: %+v", conv)
	}
	for i, m := range conv {
		calls := m.Content.ToolCalls()
		if m.Role != protocol.RoleAssistant || len(calls) == 0 {
			continue
		}
		if i+1 == len(conv) || conv[i+1].Role != protocol.RoleTool {
			t.Fatalf("message %d: tool calls without results after them", i)
		}
		for j, c := range calls {
			if j >= len(conv[i+1].Content) || conv[i+1].Content[j].ID != c.ID {
				t.Fatalf("message %d: call %s has no result", i, c.ID)
			}
		}
	}
	if last := conv[len(conv)-1]; last.Role == protocol.RoleAssistant {
		t.Fatalf("the conversation ends with the model's turn: %+v", last)
	}
}

// A run stopped while its tools ran left the model's calls without
// results: the resumed task answers each as interrupted (in memory too),
// runs none of them again, and its request is valid.
func TestResumeAnswersInterruptedCalls(t *testing.T) {
	calls := &protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Content{
		{Type: protocol.BlockText, Text: "building"},
		{Type: protocol.BlockToolCall, ID: "c1", Name: "bash", Input: json.RawMessage(`{"command":"make"}`)},
		{Type: protocol.BlockToolCall, ID: "c2", Name: "read", Input: json.RawMessage(`{"path":"x"}`)}}}
	recs := []MemoryRecord{
		{Type: MemTask, Task: "task-1", Status: "started"},
		{Type: MemMessage, Task: "task-1", Message: text(protocol.RoleUser, "build it")},
		{Type: MemMessage, Task: "task-1", Message: calls},
	}
	ran := 0
	tools := &funcTools{f: func(c protocol.ToolCall) protocol.ToolResult {
		ran++
		return protocol.ToolResult{Type: "result", ID: c.ID, Name: c.Name, OK: true}
	}}
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("checked: built")}}
	h := resumeHarness(t, llm, tools, recs, "build it")
	if res := h.run(t); res.State != Done || res.TasksDone != 1 {
		t.Fatalf("%+v\n%s", res, h.out.String())
	}
	if ran != 0 {
		t.Errorf("%d interrupted calls were run again", ran)
	}
	req := llm.reqs[0].Messages
	checkTurns(t, req)
	last := req[len(req)-1]
	if len(req) != 3 || last.Role != protocol.RoleTool || len(last.Content) != 2 {
		t.Fatalf("resumed request: %+v", req)
	}
	for i, b := range last.Content {
		if b.Type != protocol.BlockToolResult || b.ID != []string{"c1", "c2"}[i] || !b.IsError || b.Output != InterruptedCall {
			t.Errorf("result %d: %+v", i, b)
		}
	}
	if !strings.Contains(h.out.String(), "the run stopped during 2 tool calls (bash, read)") {
		t.Errorf("no log of the interrupted calls:\n%s", h.out.String())
	}
	// A later resume replays the results from memory.
	rp, err := h.sess.LoadReplay()
	if err != nil {
		t.Fatal(err)
	}
	if rp.Ended["task-1"] != "done" || rp.TotalSteps != 2 {
		t.Errorf("replay %+v", rp)
	}
}

// A run stopped in verify (or commit) left the final answer last: the
// resumed task checks it again with no model call, and no second answer
// follows the first.
func TestResumeAfterAnswerVerifies(t *testing.T) {
	recs := []MemoryRecord{
		{Type: MemTask, Task: "task-1", Status: "started"},
		{Type: MemMessage, Task: "task-1", Message: text(protocol.RoleUser, "make f")},
		{Type: MemMessage, Task: "task-1", Message: text(protocol.RoleAssistant, "made f <promise>OK</promise>")},
	}
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("a second answer")}}
	h := resumeHarness(t, llm, okTool("x"), recs, "make f")
	h.opts.Verify, h.opts.Promise = "true", "OK"
	if res := h.run(t); res.State != Done || res.TasksDone != 1 {
		t.Fatalf("%+v\n%s", res, h.out.String())
	}
	if len(llm.reqs) != 0 {
		t.Errorf("%d model calls; the answer only needed checking", len(llm.reqs))
	}
	if !strings.Contains(h.out.String(), `"from":"thinking","to":"verify","reason":"resumed after the final answer: checking it again"`) || h.count("verify") != 1 {
		t.Errorf("not verified once:\n%s", h.out.String())
	}
	ls := h.opts.Source.(*ListSource)
	if !strings.Contains(string(ls.Tasks[0].Result), `"summary":"made f"`) {
		t.Errorf("result %s", ls.Tasks[0].Result)
	}
}

// A follow-up task stopped before its prompt was recorded holds only the
// earlier task's conversation: it starts again from its prompt rather than
// "checking" the earlier task's answer.
func TestResumeFollowUpBeforeItsPrompt(t *testing.T) {
	recs := []MemoryRecord{
		{Type: MemTask, Task: "task-1", Status: "started"},
		{Type: MemMessage, Task: "task-1", Message: text(protocol.RoleUser, "one")},
		{Type: MemMessage, Task: "task-1", Message: text(protocol.RoleAssistant, "did one")},
		{Type: MemTask, Task: "task-1", Status: "done"},
		{Type: MemTask, Task: "task-2", Status: "started", Follows: "task-1"},
	}
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("did two")}}
	h := resumeHarness(t, llm, okTool("x"), recs, "one", "two")
	ls := h.opts.Source.(*ListSource)
	ls.Tasks[0].Status = protocol.StatusDone
	ls.Tasks[1].Labels = map[string]string{LabelFollowUp: "true"}
	if res := h.run(t); res.State != Done || res.TasksDone != 1 {
		t.Fatalf("%+v\n%s", res, h.out.String())
	}
	if len(llm.reqs) != 1 {
		t.Fatalf("%d model calls, want 1", len(llm.reqs))
	}
	req := llm.reqs[0].Messages
	checkTurns(t, req)
	if len(req) != 3 || req[2].Content.Text() != "two" {
		t.Errorf("request %+v", req)
	}
}
