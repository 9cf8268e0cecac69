package storetest

import (
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// Approvals: an answer is taken only by the call it answers, once; a
// worker that waits on no call, or on another, refuses an answer, and a
// worker that does not exist is fs.ErrNotExist.
func testApprovals(t *testing.T, e *env) {
	ws := e.team.Workers()
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	ans := protocol.ApprovalAnswer{Worker: "1", Call: "call_1", Approved: true, Reason: "fine", By: "storetest", TS: now}
	if err := ws.Answer(ctx, ans); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("answer for a worker with no record: %v", err)
	}
	if err := ws.Write(ctx, &protocol.Worker{Worker: "1", Host: "box1", State: "running", HeartbeatAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := ws.Answer(ctx, ans); !errors.Is(err, teamdir.ErrNoApproval) {
		t.Fatalf("answer for a worker waiting on nothing: %v", err)
	}
	wait := &protocol.PendingApproval{Call: "call_2", Tool: "bash", Input: `{"command":"git push"}`, Pattern: "bash:git push*", Since: now}
	if err := ws.Write(ctx, &protocol.Worker{Worker: "1", Host: "box1", State: "running", HeartbeatAt: now, Approval: wait}); err != nil {
		t.Fatal(err)
	}
	if err := ws.Answer(ctx, ans); !errors.Is(err, teamdir.ErrNoApproval) {
		t.Fatalf("answer to another call: %v", err)
	}
	if _, ok, err := ws.TakeAnswer(ctx, "1", "call_2"); ok || err != nil {
		t.Fatalf("an answer before any was given: %v %v", ok, err)
	}
	ans.Call, ans.Approved, ans.Reason = "call_2", false, "not on Fridays"
	if err := ws.Answer(ctx, ans); err != nil {
		t.Fatal(err)
	}
	// A record write (a heartbeat) leaves the answer where it is.
	if err := ws.Write(ctx, &protocol.Worker{Worker: "1", Host: "box1", State: "running", HeartbeatAt: now.Add(time.Second), Approval: wait}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ws.TakeAnswer(ctx, "1", "call_1"); ok || err != nil {
		t.Fatalf("the answer to call_2 was taken for call_1: %v %v", ok, err)
	}
	got, ok, err := ws.TakeAnswer(ctx, "1", "call_2")
	if err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	if got.Worker != "1" || got.Call != "call_2" || got.Approved || got.Reason != "not on Fridays" || got.By != "storetest" || !got.TS.Equal(now) {
		t.Fatalf("took %+v", got)
	}
	if _, ok, err := ws.TakeAnswer(ctx, "1", "call_2"); ok || err != nil {
		t.Fatalf("an answer taken twice: %v %v", ok, err)
	}
	if _, _, err := ws.TakeAnswer(ctx, "../x", "call_2"); !badInput(err) {
		t.Fatalf("take for a bad name: %v", err)
	}
}
