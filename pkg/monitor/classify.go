// Package monitor keeps a team of workers alive and honest (DESIGN.md §4,
// pg-monitor): it classifies each worker record as alive, stale, stuck,
// dead or done, stops the stale and stuck ones (SIGTERM, grace, SIGKILL of
// the process group, only while the recorded pid still has its recorded
// start time), releases the tasks of the dead ones through pg-queue, and
// supervises a swarm of worker processes with restarts and a team budget.
//
// Every action is taken under an flock on the team's monitor.lock and
// recorded in monitor.json, so several watchers (cron, a run supervisor, a
// person) can run at once and each action happens once.
package monitor

import (
	"fmt"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// Liveness is the monitor's verdict on one worker.
type Liveness string

const (
	Alive Liveness = "alive" // heartbeat fresh, progress recent
	Stale Liveness = "stale" // heartbeat older than the heartbeat limit, process still there
	Stuck Liveness = "stuck" // heartbeat fresh but no progress for the stall limit
	Dead  Liveness = "dead"  // the recorded process is gone (or its pid was reused)
	Done  Liveness = "done"  // the worker ended on its own (state done, failed, exited)
)

// Options are the limits of the classifier and the watch pass.
type Options struct {
	// Heartbeat: a heartbeat older than this is stale.
	Heartbeat time.Duration
	// Stall: a worker with a fresh heartbeat but no progress for this long
	// is stuck, unless it is in a call whose own deadline (busy_until) has
	// not passed. Zero disables the check.
	Stall time.Duration
	// Grace is the time between SIGTERM and SIGKILL.
	Grace time.Duration
}

// Process is what the caller found out about the recorded process. The
// classifier stays a pure function; the /proc lookup happens outside.
type Process int

const (
	// ProcUnknown: nothing to check (no pid recorded, or another host).
	ProcUnknown Process = iota
	// ProcRunning: the pid is alive and has the recorded start time.
	ProcRunning
	// ProcGone: the pid is gone, a zombie, or reused by another process.
	ProcGone
)

// Verdict is the classification of one worker record at one instant.
type Verdict struct {
	Liveness     Liveness
	Reason       string
	HeartbeatAge time.Duration
	ProgressAge  time.Duration // zero when the record has no progress time
}

// terminal worker states: the worker ended by itself.
var terminal = map[string]bool{"done": true, "failed": true, "exited": true, "stopped": true}

// Classify decides the liveness of worker record w at now, given what is
// known of its process. Order matters: an ended worker is done whatever its
// heartbeat; a vanished process is dead even if its last beat is fresh
// (nothing can beat for it any more); then stale beats stuck. A worker
// whose state says it ended but whose process is still there is judged by
// its heartbeat: pg-loop passes through "failed" when a task fails and
// goes on, and a finished process that lingers past the heartbeat limit
// is as stale as any.
func Classify(w *protocol.Worker, now time.Time, p Process, o Options) Verdict {
	v := Verdict{HeartbeatAge: age(now, w.HeartbeatAt)}
	progress := w.ProgressAt
	if progress.IsZero() {
		progress = w.StartedAt
	}
	if !progress.IsZero() {
		v.ProgressAge = age(now, progress)
	}
	ended := terminal[w.State]
	switch {
	case ended && p != ProcRunning:
		v.Liveness, v.Reason = Done, "state "+w.State
	case p == ProcGone:
		v.Liveness, v.Reason = Dead, fmt.Sprintf("pid %d is gone or reused (start time differs from %q)", w.PID, w.PIDStart)
	case w.HeartbeatAt.IsZero():
		v.Liveness, v.Reason = Stale, "no heartbeat recorded"
	case Future(now, w.HeartbeatAt):
		// A heartbeat from the future would keep the worker alive
		// forever: it proves nothing, as if there were none.
		v.Liveness, v.Reason = Stale, fmt.Sprintf("heartbeat dated in the future (%s, %s ahead of this clock; up to %s is tolerated)",
			w.HeartbeatAt.UTC().Format(time.RFC3339), round(w.HeartbeatAt.Sub(now)), MaxSkew)
	case o.Stall > 0 && !ended && !paused(w) && Future(now, progress):
		v.Liveness, v.Reason = Stuck, fmt.Sprintf("progress dated in the future (%s, %s ahead of this clock)",
			progress.UTC().Format(time.RFC3339), round(progress.Sub(now)))
	case o.Heartbeat > 0 && v.HeartbeatAge > o.Heartbeat:
		v.Liveness, v.Reason = Stale, fmt.Sprintf("last heartbeat %s ago, limit %s", round(v.HeartbeatAge), o.Heartbeat)
	case o.Stall > 0 && !ended && !paused(w) && !progress.IsZero() && v.ProgressAge > o.Stall && !now.Before(w.BusyUntil):
		v.Liveness, v.Reason = Stuck, fmt.Sprintf("no progress for %s, limit %s (heartbeat %s ago)", round(v.ProgressAge), o.Stall, round(v.HeartbeatAge))
		if !w.BusyUntil.IsZero() {
			v.Reason += fmt.Sprintf(", past the deadline of its call by %s", round(now.Sub(w.BusyUntil)))
		}
	case o.Stall > 0 && !ended && now.Before(w.BusyUntil):
		// A verify or tool call within its own timeout is no stall, however
		// long its timeout (a test suite of 20 minutes).
		v.Liveness, v.Reason = Alive, fmt.Sprintf("heartbeat %s ago, in a call until %s", round(v.HeartbeatAge), w.BusyUntil.UTC().Format(time.RFC3339))
	default:
		v.Liveness, v.Reason = Alive, fmt.Sprintf("heartbeat %s ago", round(v.HeartbeatAge))
	}
	return v
}

// MaxSkew is how far in the future a record's time may lie, for clocks
// that differ a little between hosts, before it is taken as false.
const MaxSkew = protocol.MaxClockSkew

// Future reports whether t lies more than MaxSkew after now.
func Future(now, t time.Time) bool { return t.Sub(now) > MaxSkew }

// paused workers (velocity 0, or flagged) make no progress on purpose.
func paused(w *protocol.Worker) bool { return w.Paused || w.State == "paused" }

func age(now, t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	if d := now.Sub(t); d > 0 {
		return d
	}
	return 0
}

func round(d time.Duration) time.Duration {
	if d > 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(10 * time.Millisecond)
}
