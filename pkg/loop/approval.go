package loop

import (
	"context"
	"fmt"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// Approver answers tool calls that need approval (pg-loop serve's approve
// and deny).
type Approver interface {
	// Wait makes the call of ev (a pending approval event) answerable,
	// then calls emit to announce it, then blocks until it is answered or
	// ctx ends. An answer sent as soon as the event is seen is never lost.
	Wait(ctx context.Context, ev protocol.LoopApprovalEvent, emit func()) (approved bool, reason string, err error)
}

// approvalPoll is how often a team worker looks for the answer to its
// pending approval.
const approvalPoll = 200 * time.Millisecond

// noApprover is why a call that needs approval is denied in a run where
// nobody can answer.
const noApprover = "nobody can approve it: this run is not interactive (approvals need pg-loop serve, or a team worker answered through pg-dash or pg-loop approve)"

// approval decides a call that matches an --ask pattern before it runs:
// in serve mode it waits for approve or deny, a team worker waits for an
// answer through its worker record, and any other run denies it. run is
// false for a denied call, whose result says why; err is the task's
// context ending (abort, signal) while waiting.
func (r *Runner) approval(tr *taskRun, c protocol.ToolCall) (res protocol.ToolResult, run bool, err error) {
	p, ok := askMatch(r.o.Ask, c)
	if !ok {
		return res, true, nil
	}
	ev := protocol.LoopApprovalEvent{Type: protocol.LoopApproval, TS: r.now(), Worker: r.o.Worker, Task: tr.task.ID, Step: r.step, Call: c, Pattern: p.Text, Status: protocol.ApprovalPending}
	var approved bool
	var reason string
	switch {
	case r.o.Approver != nil:
		emit := func() { r.o.Events.Emit(&ev) }
		approved, reason, err = r.waitApproval(func() (bool, string, error) { return r.o.Approver.Wait(tr.ctx, ev, emit) })
	case r.o.Team != nil:
		r.o.Events.Emit(&ev)
		approved, reason, err = r.waitApproval(func() (bool, string, error) { return r.teamApproval(tr.ctx, ev) })
	default:
		reason = noApprover
	}
	if err != nil {
		return res, false, err
	}
	ev.TS, ev.Status, ev.Reason = r.now(), protocol.ApprovalApproved, reason
	if !approved {
		ev.Status = protocol.ApprovalDenied
	}
	r.o.Events.Emit(&ev)
	if approved {
		return res, true, nil
	}
	msg := fmt.Sprintf("denied: this call of %s needs approval (--ask %s) and was not run", c.Name, p.Text)
	if reason != "" {
		msg += ": " + reason
	}
	return failedResult(c, msg), false, nil
}

// waitApproval runs a wait, counted as waiting (the heartbeat takes it
// for progress: a person may take a while to answer).
func (r *Runner) waitApproval(wait func() (bool, string, error)) (bool, string, error) {
	r.waiting.Store(true)
	defer r.waiting.Store(false)
	defer func(start time.Time) { r.times.wait += time.Since(start) }(time.Now())
	return wait()
}

// teamApproval shows the pending call in the worker record and waits for
// its answer in the team's store (worker-<n>.approval on files).
func (r *Runner) teamApproval(ctx context.Context, ev protocol.LoopApprovalEvent) (bool, string, error) {
	input := string(ev.Call.Input)
	if len(input) > 2000 {
		input = input[:2000] + "…"
	}
	r.updateWorker(func(w *protocol.Worker) {
		w.Approval = &protocol.PendingApproval{Call: ev.Call.ID, Tool: ev.Call.Name, Input: input, Pattern: ev.Pattern, Task: ev.Task, Since: ev.TS}
	})
	r.writeWorker()
	defer func() {
		r.updateWorker(func(w *protocol.Worker) { w.Approval = nil })
		r.writeWorker()
	}()
	t := time.NewTicker(approvalPoll)
	defer t.Stop()
	for {
		a, ok, err := r.o.Team.Workers().TakeAnswer(ctx, r.o.Worker, ev.Call.ID)
		if err != nil {
			r.log("warn", "approval answer: %v", err)
		} else if ok {
			by := a.By
			if by == "" {
				by = "an answer"
			}
			r.log("info", "call %s %s by %s", ev.Call.ID, map[bool]string{true: "approved", false: "denied"}[a.Approved], by)
			return a.Approved, a.Reason, nil
		}
		select {
		case <-ctx.Done():
			return false, "", context.Cause(ctx)
		case <-t.C:
		}
	}
}
