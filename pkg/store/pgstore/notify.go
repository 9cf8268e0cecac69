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
type notifier struct {
	s       *Store
	mu      sync.Mutex
	dirty   map[string]bool // teams changed since the last NOTIFY went out
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

// changed says that a change of team has committed.
func (n *notifier) changed(team string) {
	n.mu.Lock()
	n.dirty[team] = true
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

// notifySQL notifies the channels of $1 (named in Go: a statement that
// calls no function of ours costs a fresh backend less to plan).
const notifySQL = `SELECT pg_notify(c, '') FROM unnest($1::text[]) AS c`

// flush notifies the teams changed since the last flush.
func (n *notifier) flush() {
	n.mu.Lock()
	chans := make([]string, 0, len(n.dirty))
	for t := range n.dirty {
		chans = append(chans, channel(t))
	}
	clear(n.dirty)
	n.mu.Unlock()
	if len(chans) == 0 {
		return
	}
	sort.Strings(chans)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.s.pool.Exec(ctx, notifySQL, chans) // best effort (see notifier)
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
