package monitor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
)

// tally counts the tasks that this run ended, from the team's journal: the
// tasks that one of its workers claimed and that then ended, done or
// failed (by the worker, or by the queue when the worker's lease expired
// with no attempt left). A task that a worker of another run (another host
// on a shared store, a person with pg-queue) ended meanwhile is not this
// run's.
type tally struct {
	fl      store.Follower
	names   map[string]bool // this run's worker names
	claimed map[string]bool // tasks they claimed, not yet ended
}

// tallyWait bounds the reading of the run's journal at its end.
const tallyWait = 30 * time.Second

// startTally follows the journal from now on.
func startTally(ctx context.Context, t store.Team) (*tally, error) {
	fl, err := t.Journal().Follow(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("follow the journal: %w", err)
	}
	return &tally{fl: fl, names: map[string]bool{}, claimed: map[string]bool{}}, nil
}

// count reads the journal up to the monitor event end (which the run
// appended after its last worker ended, so every task event of the run
// comes before it) and returns how many of the run's tasks ended done and
// failed.
func (ta *tally) count(ctx context.Context, end protocol.MonitorEvent) (done, failed int, err error) {
	ctx, cancel := context.WithTimeout(ctx, tallyWait)
	defer cancel()
	for {
		line, err := ta.fl.Next(ctx)
		if err != nil {
			return done, failed, fmt.Errorf("read the journal to the end of the run: %w", err)
		}
		var ev struct {
			Type   string    `json:"type"`
			TS     time.Time `json:"ts"`
			Op     string    `json:"op"`
			Action string    `json:"action"`
			Reason string    `json:"reason"`
			Task   string    `json:"task"`
			Status string    `json:"status"`
			Worker string    `json:"worker"`
		}
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		switch {
		case ev.Type == protocol.JournalMonitor && ev.Action == end.Action && ev.Reason == end.Reason && ev.TS.Equal(end.TS):
			return done, failed, nil
		case ev.Type != protocol.JournalTask:
		case ev.Op == "claim" && ta.names[ev.Worker]:
			ta.claimed[ev.Task] = true
		case ev.Op == "claim": // taken over by a worker not of this run
			delete(ta.claimed, ev.Task)
		case !ta.claimed[ev.Task]:
		case ev.Status == protocol.StatusDone:
			delete(ta.claimed, ev.Task)
			done++
		case ev.Status == protocol.StatusFailed:
			delete(ta.claimed, ev.Task)
			failed++
		}
	}
}

func (ta *tally) close() { _ = ta.fl.Close() }
