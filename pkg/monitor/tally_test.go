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
