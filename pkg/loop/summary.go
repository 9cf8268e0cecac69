package loop

import (
	"errors"
	"syscall"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// timings is where a run's time went, besides the loop's own work.
type timings struct {
	start  time.Time
	model  time.Duration // waiting on the model
	tools  time.Duration // in tool calls
	verify time.Duration // in verify commands and commits
	wait   time.Duration // paused by the velocity, waiting for a claimable task
}

// Outcome names how a run ended, as the summary record says it; OK is
// the exit status 0.
func (res Result) Outcome() (outcome string, ok bool) {
	var le *LimitError
	switch {
	case res.Signal:
		return "interrupted", false
	case res.State == Failed && errors.As(res.Err, &le):
		return "limit", false
	case res.State == Failed:
		return "failed", false
	case res.Limit:
		return "limit", false
	case res.Failed > 0:
		return "failed", false
	case res.Idle:
		return "idle", false
	}
	return "done", true
}

// summary is the run's last record.
func (r *Runner) summary() *protocol.LoopSummaryEvent {
	wall := time.Since(r.times.start)
	t := r.times
	harness := max(wall-t.model-t.tools-t.verify-t.wait, 0)
	outcome, ok := r.res.Outcome()
	ev := &protocol.LoopSummaryEvent{Type: protocol.LoopSummary, TS: r.now(), Worker: r.o.Worker, OK: ok, Outcome: outcome,
		Tasks: protocol.LoopTaskCounts{Done: r.res.TasksDone, Failed: r.res.Failed, Cancelled: r.res.Cancelled, Released: r.res.Released},
		Steps: r.steps, Usage: r.own,
		WallMS: wall.Milliseconds(), ModelMS: t.model.Milliseconds(), ToolsMS: t.tools.Milliseconds(), VerifyMS: t.verify.Milliseconds(),
		WaitMS: t.wait.Milliseconds(), HarnessMS: harness.Milliseconds()}
	if r.o.Session != nil {
		ev.Session = r.o.Session.Info.ID
	}
	switch {
	case ok:
	case r.res.Err != nil:
		ev.Reason = termtext.OneLine(r.res.Err.Error(), 500)
	case r.res.Idle:
		ev.Reason = "no claimable task within the idle wait; left: " + r.res.IdleLeft
	case r.res.Failed > 0:
		ev.Reason = "a task failed"
		if r.res.Limit {
			ev.Reason = "a limit stopped a task"
		}
	}
	return ev
}

// resources ends the coprocesses, whose usage the kernel gives when they
// are waited for, and reports theirs and pg-loop's own.
func (r *Runner) resources() []protocol.ProcessUsage {
	var out []protocol.ProcessUsage
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		out = append(out, protocol.ProcessUsage{Component: "loop", Processes: 1, UserMS: timevalMS(ru.Utime), SysMS: timevalMS(ru.Stime), MaxRSSKB: ru.Maxrss})
	}
	for _, c := range []any{r.o.LLM, r.o.Tools} {
		co, ok := c.(interface {
			Close() error
			Usage() (protocol.ProcessUsage, bool)
		})
		if !ok {
			continue
		}
		co.Close()
		if u, ok := co.Usage(); ok {
			out = append(out, u)
		}
	}
	return out
}
