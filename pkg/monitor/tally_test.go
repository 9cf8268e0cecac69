package monitor

import (
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// TestTallyLeavesTasksOthersTookOver: a task the run's worker claimed and
// gave back, then claimed and finished by a worker of another run, is not
// the run's; a task its worker claimed and finished is, as is one it
// claimed again after another worker gave it up.
func TestTallyLeavesTasksOthersTookOver(t *testing.T) {
	d := teamdir.Dir{Home: t.TempDir(), Team: "t"}
	if err := d.Ensure(); err != nil {
		t.Fatal(err)
	}
	tm := fileTeam(d)
	ta, err := startTally(t.Context(), tm)
	if err != nil {
		t.Fatal(err)
	}
	defer ta.close()
	ta.names["w1"] = true
	ta.start(t.Context())
	ts := time.Now().UTC()
	ev := func(op, task, worker, status string) protocol.TaskEvent {
		return protocol.TaskEvent{Type: protocol.JournalTask, TS: ts, Op: op, Task: task, Worker: worker, Status: status}
	}
	end := protocol.MonitorEvent{Type: protocol.JournalMonitor, TS: ts, Action: ActDone, Reason: "queue drained"}
	if err := tm.Journal().Append(t.Context(),
		ev("claim", "a", "w1", protocol.StatusClaimed),
		ev("release", "a", "w1", protocol.StatusPending),
		ev("claim", "a", "other-1", protocol.StatusClaimed),
		ev("complete", "a", "other-1", protocol.StatusDone),
		ev("claim", "b", "w1", protocol.StatusClaimed),
		ev("complete", "b", "w1", protocol.StatusDone),
		ev("claim", "c", "other-1", protocol.StatusClaimed),
		ev("release", "c", "other-1", protocol.StatusPending),
		ev("claim", "c", "w1", protocol.StatusClaimed),
		ev("fail", "c", "w1", protocol.StatusFailed),
		end,
	); err != nil {
		t.Fatal(err)
	}
	done, failed, err := ta.count(t.Context(), end)
	if err != nil || done != 1 || failed != 1 {
		t.Fatalf("done %d, failed %d (%v); want 1 and 1", done, failed, err)
	}
}

// TestTallyReadsAsTheRunGoes: the tally reads the journal while the run
// lasts, not only at its end (on PostgreSQL its follower's connection
// would otherwise leave the server's notifications unread for the whole
// run).
func TestTallyReadsAsTheRunGoes(t *testing.T) {
	d := teamdir.Dir{Home: t.TempDir(), Team: "t"}
	if err := d.Ensure(); err != nil {
		t.Fatal(err)
	}
	tm := fileTeam(d)
	ta, err := startTally(t.Context(), tm)
	if err != nil {
		t.Fatal(err)
	}
	defer ta.close()
	ta.names["w1"] = true
	ta.start(t.Context())
	ts := time.Now().UTC()
	if err := tm.Journal().Append(t.Context(),
		protocol.TaskEvent{Type: protocol.JournalTask, TS: ts, Op: "claim", Task: "a", Worker: "w1", Status: protocol.StatusClaimed},
		protocol.TaskEvent{Type: protocol.JournalTask, TS: ts, Op: "complete", Task: "a", Worker: "w1", Status: protocol.StatusDone},
	); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ta.mu.Lock()
		done := ta.done
		ta.mu.Unlock()
		if done == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tally had read nothing of the journal 10s after the events (done %d)", done)
		}
	}
}
