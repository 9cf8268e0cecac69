package monitor

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

func TestClassify(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	o := Options{Heartbeat: 30 * time.Second, Stall: 10 * time.Minute, Grace: 10 * time.Second}
	rec := func(state string, beat, progress time.Time) *protocol.Worker {
		return &protocol.Worker{Worker: "1", PID: 42, PIDStart: "100", State: state, HeartbeatAt: beat, ProgressAt: progress}
	}
	tests := []struct {
		name   string
		w      *protocol.Worker
		p      Process
		o      Options
		want   Liveness
		reason string
	}{
		{"fresh", rec("executing", ago(time.Second), ago(time.Minute)), ProcRunning, o, Alive, "heartbeat 1s ago"},
		{"old heartbeat", rec("executing", ago(31*time.Second), ago(time.Minute)), ProcRunning, o, Stale, "last heartbeat 31s ago, limit 30s"},
		{"heartbeat exactly at the limit", rec("executing", ago(30*time.Second), ago(time.Minute)), ProcRunning, o, Alive, ""},
		{"no heartbeat", rec("starting", time.Time{}, time.Time{}), ProcRunning, o, Stale, "no heartbeat"},
		{"process gone, fresh beat", rec("executing", ago(time.Second), ago(time.Second)), ProcGone, o, Dead, "pid 42 is gone or reused"},
		{"process gone, old beat", rec("executing", ago(time.Hour), ago(time.Hour)), ProcGone, o, Dead, ""},
		{"ended", rec("done", ago(time.Hour), ago(time.Hour)), ProcGone, o, Done, "state done"},
		{"failed, process gone", rec("failed", ago(time.Second), ago(time.Second)), ProcGone, o, Done, "state failed"},
		{"ended, unverifiable process", rec("done", ago(time.Hour), ago(time.Hour)), ProcUnknown, o, Done, "state done"},
		{"ended, process lingering", rec("done", ago(time.Second), ago(time.Hour)), ProcRunning, o, Alive, ""},
		{"ended, process lingering past the limit", rec("failed", ago(time.Minute), ago(time.Hour)), ProcRunning, o, Stale, ""},
		{"no progress", rec("executing", ago(time.Second), ago(11*time.Minute)), ProcRunning, o, Stuck, "no progress for 11m0s, limit 10m0s"},
		// Issue 20: a heartbeat dated 2099 kept a worker alive forever.
		{"heartbeat in the future", rec("executing", time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), ago(time.Second)), ProcRunning, o, Stale, "heartbeat dated in the future (2099-01-01T00:00:00Z"},
		{"heartbeat a little ahead (clock skew)", rec("executing", ago(-30*time.Second), ago(time.Second)), ProcRunning, o, Alive, ""},
		{"progress in the future", rec("executing", ago(time.Second), ago(-time.Hour)), ProcRunning, o, Stuck, "progress dated in the future"},
		{"stall disabled", rec("executing", ago(time.Second), ago(time.Hour)), ProcRunning, Options{Heartbeat: 30 * time.Second}, Alive, ""},
		{"paused makes no progress on purpose", &protocol.Worker{State: "executing", Paused: true, HeartbeatAt: ago(time.Second), ProgressAt: ago(time.Hour)}, ProcRunning, o, Alive, ""},
		{"progress falls back to started_at", &protocol.Worker{State: "thinking", HeartbeatAt: ago(time.Second), StartedAt: ago(time.Hour)}, ProcRunning, o, Stuck, ""},
		{"stale wins over stuck", rec("executing", ago(time.Hour), ago(time.Hour)), ProcRunning, o, Stale, ""},
		{"unknown process judged by heartbeat", rec("executing", ago(time.Hour), ago(time.Hour)), ProcUnknown, o, Stale, ""},
		{"unknown process, fresh", rec("executing", ago(time.Second), ago(time.Second)), ProcUnknown, o, Alive, ""},
		// F13: a verify or tool call within its own timeout, longer than
		// the stall limit, is no stall; past its deadline it is.
		{"in a call within its deadline", &protocol.Worker{State: "verify", HeartbeatAt: ago(time.Second), ProgressAt: ago(15 * time.Minute), BusyUntil: now.Add(5 * time.Minute)}, ProcRunning, o, Alive, "in a call until 2026-11-22T10:05:00Z"},
		{"in a call past its deadline", &protocol.Worker{State: "verify", HeartbeatAt: ago(time.Second), ProgressAt: ago(15 * time.Minute), BusyUntil: ago(2 * time.Minute)}, ProcRunning, o, Stuck, "no progress for 15m0s, limit 10m0s (heartbeat 1s ago), past the deadline of its call by 2m0s"},
		{"a deadline does not hide a stale heartbeat", &protocol.Worker{State: "verify", HeartbeatAt: ago(time.Hour), ProgressAt: ago(time.Hour), BusyUntil: now.Add(time.Hour)}, ProcRunning, o, Stale, ""},
		{"a deadline within the stall limit changes nothing", &protocol.Worker{State: "executing", HeartbeatAt: ago(time.Second), ProgressAt: ago(time.Minute), BusyUntil: now.Add(time.Minute)}, ProcRunning, o, Alive, ""},
		{"clock skew: beat in the future", rec("executing", now.Add(time.Minute), now.Add(time.Minute)), ProcRunning, o, Alive, "heartbeat 0s ago"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Classify(tt.w, now, tt.p, tt.o)
			if v.Liveness != tt.want {
				t.Fatalf("liveness %s (%s), want %s", v.Liveness, v.Reason, tt.want)
			}
			if !strings.Contains(v.Reason, tt.reason) {
				t.Fatalf("reason %q, want it to contain %q", v.Reason, tt.reason)
			}
		})
	}
}

// Permanent names the exits a restart cannot heal; the others are
// restarted under --restart on-failure.
func TestPermanent(t *testing.T) {
	exitErr := func(script string) error {
		return exec.Command("sh", "-c", script).Run()
	}
	cases := []struct {
		name    string
		err     error
		lastErr string
		want    string
	}{
		{"clean exit", nil, "", ""},
		{"crash", exitErr("exit 1"), "panic: oops", ""},
		{"other status", exitErr("exit 3"), "", ""},
		{"usage", exitErr("exit 2"), "", "exit status 2"},
		{"limit", exitErr("exit 4"), "", "exit status 4"},
		{"auth", exitErr("exit 1"), "pg-loop: error: unrecoverable: model: 401", "unrecoverable"},
		{"signal", exitErr("kill -TERM $$"), "", ""},
	}
	for _, c := range cases {
		if got := Permanent(c.err, c.lastErr); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: Permanent = %q, want %q", c.name, got, c.want)
		}
	}
}
