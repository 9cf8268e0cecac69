package loop

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

func doCmd(t *testing.T, c *Control, cmd protocol.ServeCommand) protocol.ServeReply {
	t.Helper()
	rep, after := c.Do(cmd, time.Now())
	after()
	return rep
}

func TestControlCommands(t *testing.T) {
	c := NewControl(map[string]bool{"task-4": true, "other": true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if rep := doCmd(t, c, protocol.ServeCommand{Type: "follow_up", ID: "1"}); rep.OK || rep.Error != "follow_up needs a message" {
		t.Errorf("follow_up without a message: %+v", rep)
	}
	// Idle: a follow_up starts at once; ids go on from the session's.
	rep := doCmd(t, c, protocol.ServeCommand{Type: "follow_up", ID: "2", Message: "go on", Verify: "true"})
	if !rep.OK || rep.Task != "task-5" || rep.ID != "2" || rep.Type != "reply" || rep.Command != "follow_up" {
		t.Fatalf("follow_up: %+v", rep)
	}
	task, err := c.Next(ctx)
	if err != nil || task == nil || task.ID != "task-5" || task.Prompt != "go on" || task.Verify != "true" || task.Labels[LabelFollowUp] != "true" {
		t.Fatalf("Next: %+v %v", task, err)
	}
	// Busy: prompt is refused, steer and follow_up are kept.
	if rep := doCmd(t, c, protocol.ServeCommand{Type: "prompt", Message: "x"}); rep.OK {
		t.Errorf("prompt while busy: %+v", rep)
	}
	doCmd(t, c, protocol.ServeCommand{Type: "steer", Message: "left"})
	doCmd(t, c, protocol.ServeCommand{Type: "follow_up", Message: "next"})
	if st := doCmd(t, c, protocol.ServeCommand{Type: "state"}).State; st == nil || !st.Busy || st.Queued != 1 || st.Steering != 1 {
		t.Errorf("state: %+v", st)
	}
	// The task ends before the steer was used: the queued follow_up runs
	// first, then the steer message as a task of its own.
	_ = c.Complete(ctx, task, nil)
	if t2, _ := c.Next(ctx); t2 == nil || t2.Prompt != "next" {
		t.Fatalf("after the task: %+v", t2)
	}
	_ = c.Fail(ctx, task, "x", false)
	if t3, _ := c.Next(ctx); t3 == nil || t3.Prompt != "left" {
		t.Fatalf("the late steer: %+v", t3)
	}
	_ = c.Release(ctx, task)
	// An approval waits until answered; an unknown call is an error.
	ev := protocol.LoopApprovalEvent{Type: "approval", Call: protocol.ToolCall{ID: "c1", Name: "bash"}, Status: "pending"}
	none := func() {}
	// A client that approves the moment it reads the pending event finds
	// the call waiting: emit runs once the call is registered.
	fast := protocol.LoopApprovalEvent{Type: "approval", Call: protocol.ToolCall{ID: "c0", Name: "bash"}, Status: "pending"}
	ok, _, _ := c.Wait(ctx, fast, func() {
		if rep := doCmd(t, c, protocol.ServeCommand{Type: "approve", Call: "c0"}); !rep.OK {
			t.Errorf("approve sent on the pending event: %+v", rep)
		}
	})
	if !ok {
		t.Error("a call approved on its pending event was not approved")
	}
	got := make(chan bool, 1)
	go func() {
		ok, _, _ := c.Wait(ctx, ev, none)
		got <- ok
	}()
	for len(doCmd(t, c, protocol.ServeCommand{Type: "state"}).State.Approvals) == 0 {
		time.Sleep(time.Millisecond)
	}
	if rep := doCmd(t, c, protocol.ServeCommand{Type: "approve", Call: "c9"}); rep.OK {
		t.Errorf("approve of an unknown call: %+v", rep)
	}
	doCmd(t, c, protocol.ServeCommand{Type: "approve", Call: "c1"})
	if !<-got {
		t.Error("approved call not approved")
	}
	// The end of the commands denies what waits and what comes, and
	// Next reports the end once the queue is empty.
	go func() {
		ok, reason, _ := c.Wait(ctx, protocol.LoopApprovalEvent{Call: protocol.ToolCall{ID: "c2"}}, none)
		got <- ok || reason == ""
	}()
	for len(doCmd(t, c, protocol.ServeCommand{Type: "state"}).State.Approvals) == 0 {
		time.Sleep(time.Millisecond)
	}
	c.EndOfCommands()
	if <-got {
		t.Error("a pending approval survived the end of the commands")
	}
	if ok, reason, _ := c.Wait(ctx, ev, none); ok || reason == "" {
		t.Error("an approval after the end of the commands was not denied")
	}
	if t4, err := c.Next(ctx); t4 != nil || err != nil {
		t.Errorf("Next after the end: %+v %v", t4, err)
	}
	if rep := doCmd(t, c, protocol.ServeCommand{Type: "prompt", Message: "late"}); rep.OK {
		t.Errorf("prompt after the end: %+v", rep)
	}
}

// TestNoReplyAfterTheEnd: once the run's summary is out, a command read
// later gets no reply, so the end marker stays the last line.
func TestNoReplyAfterTheEnd(t *testing.T) {
	var out strings.Builder
	ev := NewEmitter(&out, false)
	c := NewControl(nil)
	ev.Observe(c.observe)
	ev.Emit(&protocol.LoopSummaryEvent{Type: protocol.LoopSummary})
	if err := c.Commands(strings.NewReader(`{"type":"state","id":"late"}`+"\n"), ev, time.Now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), `"late"`) {
		t.Errorf("a reply after the summary:\n%s", out.String())
	}
}

// FuzzServeCommands: any input to pg-loop serve gets replies or error
// records, never a panic, and every reply line is a loop event.
func FuzzServeCommands(f *testing.F) {
	f.Add(`{"type":"prompt","id":"1","message":"x"}` + "\n" + `{"type":"steer","message":"y"}`)
	f.Add(`{"type":"approve","call":"c1"}` + "\n{bad\n" + `{"type":"shutdown"}`)
	f.Add(`{"type":"follow_up","message":"a","verify":"true","extra":1}`)
	f.Fuzz(func(t *testing.T, in string) {
		var out strings.Builder
		ev := NewEmitter(&out, false)
		c := NewControl(nil)
		if err := c.Commands(strings.NewReader(in), ev, time.Now); err != nil {
			return // a read error of the input itself (a line too long)
		}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if line == "" {
				continue
			}
			if _, err := protocol.LoopEvents.Decode([]byte(line)); err != nil {
				t.Fatalf("not a loop event: %v\n%s", err, line)
			}
		}
	})
}

// serveHarness runs a runner whose tasks come from serve commands.
func serveHarness(t *testing.T, llm LLM) (*harness, *Control, *Runner) {
	t.Helper()
	h := newHarness(t, llm, okTool("x"))
	c := NewControl(nil)
	h.opts.Source, h.opts.Approver, h.opts.Control = c, c, c
	r, err := NewRunner(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	c.Attach(r)
	return h, c, r
}

// A shutdown aborts the running task, and the tasks queued behind it,
// which their prompt or follow_up accepted, end cancelled with a task
// event each (in the session's memory too): none vanishes.
func TestShutdownCancelsQueuedTasks(t *testing.T) {
	h, c, r := serveHarness(t, blockingLLM{})
	done := make(chan Result, 1)
	go func() { done <- r.Run(context.Background()) }()
	doCmd(t, c, protocol.ServeCommand{Type: "prompt", ID: "1", Message: "one"})
	for doCmd(t, c, protocol.ServeCommand{Type: "state"}).State.State != string(Thinking) {
		time.Sleep(time.Millisecond)
	}
	for i, m := range []string{"two", "three"} {
		if rep := doCmd(t, c, protocol.ServeCommand{Type: "follow_up", Message: m}); rep.Task != fmt.Sprintf("task-%d", i+2) {
			t.Fatalf("follow_up: %+v", rep)
		}
	}
	doCmd(t, c, protocol.ServeCommand{Type: "shutdown", ID: "bye"})
	var res Result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end after shutdown")
	}
	out := h.out.String()
	if res.Cancelled != 3 || res.TasksDone != 0 || res.Failed != 0 {
		t.Errorf("result %+v, want 3 cancelled", res)
	}
	if !strings.Contains(out, `"task":"task-1","title":"one","status":"failed","reason":"shut down"`) {
		t.Errorf("the running task was not aborted:\n%s", out)
	}
	for _, id := range []string{"task-2", "task-3"} {
		if !regexp.MustCompile(`"type":"task","ts":"[^"]*","task":"` + id + `","title":"[a-z]+","status":"cancelled","reason":"shut down before it started"`).MatchString(out) {
			t.Errorf("no cancelled event for the queued %s:\n%s", id, out)
		}
	}
	if !strings.Contains(out, `"tasks":{"done":0,"failed":0,"cancelled":3,"released":0}`) {
		t.Errorf("summary:\n%s", out)
	}
	rp, err := h.sess.LoadReplay()
	if err != nil || rp.Ended["task-2"] != protocol.StatusCancelled || rp.Ended["task-3"] != protocol.StatusCancelled {
		t.Errorf("session memory: %+v %v", rp, err)
	}
}

// An abort (abort or shutdown) that comes after Next handed a task out,
// before the runner made it current, cancels that task as it starts.
func TestAbortBeforeTaskStarts(t *testing.T) {
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}
	h := newHarness(t, llm, okTool("x"), "one")
	r, err := NewRunner(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	r.abortTask(ErrShutdown)
	res := r.Run(context.Background())
	if res.Cancelled != 1 || res.TasksDone != 0 {
		t.Errorf("result %+v, want the task cancelled\n%s", res, h.out.String())
	}
	if len(llm.reqs) != 0 {
		t.Errorf("the model was called %d times", len(llm.reqs))
	}
}
