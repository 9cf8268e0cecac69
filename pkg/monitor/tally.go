package monitor

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
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
//
// It reads the journal as the run goes (start), not only at its end: a
// follower on a PostgreSQL store holds a connection that LISTENs on the
// team's channel, and one whose notifications nobody reads holds back the
// server's notification queue, for every database of the server, as long
// as the run lasts.
type tally struct {
	fl      store.Follower
	names   map[string]bool // this run's worker names, set before start
	stop    context.CancelFunc
	stopped chan struct{} // closed when the reading ends (nil: not started)

	mu      sync.Mutex
	claimed map[string]bool // tasks they claimed, not yet ended
	done    int
	failed  int
	ends    []endSeen     // the monitor done events read so far
	more    chan struct{} // one is read (buffered: one is enough)
	err     error         // why the reading ended
}

// endSeen is a monitor done event read from the journal, with the counts
// of the events before it.
type endSeen struct {
	ts           time.Time
	reason       string
	done, failed int
}

// tallyWait bounds the wait for the run's own done event at its end.
const tallyWait = 30 * time.Second

// startTally follows the journal from now on.
func startTally(ctx context.Context, t store.Team) (*tally, error) {
	fl, err := t.Journal().Follow(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("follow the journal: %w", err)
	}
	return &tally{fl: fl, names: map[string]bool{}, claimed: map[string]bool{}, more: make(chan struct{}, 1)}, nil
}

// start reads the journal in the background until close.
func (ta *tally) start(ctx context.Context) {
	ctx, ta.stop = context.WithCancel(ctx)
	ta.stopped = make(chan struct{})
	go func() {
		defer close(ta.stopped)
		for {
			line, err := ta.fl.Next(ctx)
			ta.mu.Lock()
			if err != nil {
				ta.err = err
			} else {
				ta.note(line)
			}
			ta.mu.Unlock()
			select {
			case ta.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
}

// note counts one journal record (ta.mu held).
func (ta *tally) note(line []byte) {
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
		return
	}
	switch {
	case ev.Type == protocol.JournalMonitor && ev.Action == ActDone:
		ta.ends = append(ta.ends, endSeen{ts: ev.TS, reason: ev.Reason, done: ta.done, failed: ta.failed})
	case ev.Type != protocol.JournalTask:
	case ev.Op == "claim" && ta.names[ev.Worker]:
		ta.claimed[ev.Task] = true
	case ev.Op == "claim": // taken over by a worker not of this run
		delete(ta.claimed, ev.Task)
	case !ta.claimed[ev.Task]:
	case ev.Status == protocol.StatusDone:
		delete(ta.claimed, ev.Task)
		ta.done++
	case ev.Status == protocol.StatusFailed:
		delete(ta.claimed, ev.Task)
		ta.failed++
	}
}

// count waits until the reading has reached the monitor event end (which
// the run appended after its last worker ended, so every task event of the
// run comes before it) and returns how many of the run's tasks ended done
// and failed.
func (ta *tally) count(ctx context.Context, end protocol.MonitorEvent) (done, failed int, err error) {
	if ta.stopped == nil {
		return 0, 0, fmt.Errorf("read the journal to the end of the run: the tally was not started")
	}
	ctx, cancel := context.WithTimeout(ctx, tallyWait)
	defer cancel()
	for {
		ta.mu.Lock()
		for _, e := range ta.ends {
			if e.ts.Equal(end.TS) && e.reason == end.Reason {
				ta.mu.Unlock()
				return e.done, e.failed, nil
			}
		}
		err := ta.err
		ta.mu.Unlock()
		if err != nil {
			return 0, 0, fmt.Errorf("read the journal to the end of the run: %w", err)
		}
		select {
		case <-ta.more:
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("read the journal to the end of the run: %w", ctx.Err())
		}
	}
}

// close stops the reading and the follower.
func (ta *tally) close() {
	if ta.stopped != nil {
		ta.stop()
		<-ta.stopped
	}
	_ = ta.fl.Close()
}
