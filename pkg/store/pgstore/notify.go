package pgstore

import (
	"context"
	"sort"
	"sync"
	"time"
)

// notifier wakes a team's listeners (followers, waiting claims) after
// changes have committed: NOTIFY on the team's channel, in a transaction
// of its own that writes nothing and so waits for no disk. A NOTIFY inside
// the change would hold PostgreSQL's database-wide notify lock until the
// change's commit reached the disk (PostgreSQL 15 and earlier), one commit
// at a time; and every notifying transaction takes that lock, so the
// notifier coalesces: changes made while one NOTIFY is on its way share the
// next. Close sends what is pending. A lost wake-up costs a listener at
// most a second: listeners look again that often.
//
// The payload is workPayload when a change may have made a task claimable
// (frees): waiting claimers sleep through the others (claims, renewals,
// worker events), which followers still wake for.
type notifier struct {
	s       *Store
	mu      sync.Mutex
	dirty   map[string]bool // teams changed since the last NOTIFY went out: whether a change freed work
	kick    chan struct{}   // a change is waiting (buffered: one is enough)
	closing chan struct{}
	done    chan struct{}
}

func newNotifier(s *Store) *notifier {
	n := &notifier{s: s, dirty: map[string]bool{}, kick: make(chan struct{}, 1),
		closing: make(chan struct{}), done: make(chan struct{})}
	go n.run()
	return n
}

// workPayload is the payload of a notification after changes of which one
// may have made a task claimable.
const workPayload = "work"

// frees reports whether a change with a journal event op may make a task
// claimable: a new task, a task back to pending, a dependency done.
func frees(op string) bool {
	switch op {
	case "add", "release", "fail", "complete":
		return true
	}
	return false
}

// changed says that a change of team has committed; work: it may have
// made a task claimable.
func (n *notifier) changed(team string, work bool) {
	n.mu.Lock()
	n.dirty[team] = n.dirty[team] || work
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		select {
		case <-n.kick:
			n.flush()
		case <-n.closing:
			n.flush()
			return
		}
	}
}

// notifySQL notifies the channels of $1 with the payloads of $2 (named in
// Go: a statement that calls no function of ours costs a fresh backend
// less to plan).
const notifySQL = `SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS x(c, p)`

// flush notifies the teams changed since the last flush.
func (n *notifier) flush() {
	n.mu.Lock()
	teams := make([]string, 0, len(n.dirty))
	for t := range n.dirty {
		teams = append(teams, t)
	}
	sort.Strings(teams)
	chans, payloads := make([]string, len(teams)), make([]string, len(teams))
	for i, t := range teams {
		chans[i] = channel(t)
		if n.dirty[t] {
			payloads[i] = workPayload
		}
	}
	clear(n.dirty)
	n.mu.Unlock()
	if len(teams) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.s.pool.Exec(ctx, notifySQL, chans, payloads) // best effort (see notifier)
}

// close sends what is pending and stops the notifier.
func (n *notifier) close() {
	select {
	case <-n.closing:
	default:
		close(n.closing)
	}
	<-n.done
}
