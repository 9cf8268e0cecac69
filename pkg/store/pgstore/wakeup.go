package pgstore

import (
	"context"
	"sync"
	"time"
)

// wakeups let a store's waiting claims share one listener per team: in a
// long-lived store (the host's store agent) twenty idle workers waiting for
// a task hold one LISTEN connection, not twenty. The listener runs while
// someone waits and closes with the last of them.
type wakeups struct {
	mu    sync.Mutex
	teams map[string]*wakeup
}

// wakeup is one team's shared listener.
type wakeup struct {
	refs  int
	mu    sync.Mutex
	gen   chan struct{} // closed when a change may have made a task claimable
	ready chan struct{} // closed once the listener first listened, or failed to
	stop  context.CancelFunc
	done  chan struct{}
}

// subscribe returns team's wakeup, starting its listener when no one else
// waits; release ends the subscription.
func (s *Store) subscribe(team string) (w *wakeup, release func()) {
	s.wakes.mu.Lock()
	defer s.wakes.mu.Unlock()
	if s.wakes.teams == nil {
		s.wakes.teams = map[string]*wakeup{}
	}
	w = s.wakes.teams[team]
	if w == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w = &wakeup{gen: make(chan struct{}), ready: make(chan struct{}), stop: cancel, done: make(chan struct{})}
		s.wakes.teams[team] = w
		go s.listenFor(ctx, team, w)
	}
	w.refs++
	return w, func() {
		s.wakes.mu.Lock()
		defer s.wakes.mu.Unlock()
		w.refs--
		if w.refs == 0 {
			delete(s.wakes.teams, team)
			w.stop()
		}
	}
}

// closeWakeups stops every listener (Close).
func (s *Store) closeWakeups() {
	s.wakes.mu.Lock()
	ws := s.wakes.teams
	s.wakes.teams = nil
	s.wakes.mu.Unlock()
	for _, w := range ws {
		w.stop()
		<-w.done
	}
}

// current is what the next wake-up closes: take it before looking for a
// task, so that a change between the look and the wait is not missed.
func (w *wakeup) current() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen
}

func (w *wakeup) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.gen)
	w.gen = make(chan struct{})
}

// listenFor runs team's listener until ctx ends. After a broken
// connection it connects again and wakes everyone, since a notification
// may have been missed meanwhile; waiters look again every second anyway.
func (s *Store) listenFor(ctx context.Context, team string, w *wakeup) {
	defer close(w.done)
	l := newListener(s.cfg.ConnConfig, channel(team))
	defer l.close()
	first := true
	for ctx.Err() == nil {
		err := l.listen(ctx)
		if first {
			first = false
			close(w.ready)
		} else if err == nil {
			w.wake() // connected again
		}
		if err != nil {
			l.backoff = min(max(2*l.backoff, 50*time.Millisecond), time.Second)
			select {
			case <-ctx.Done():
			case <-time.After(l.backoff):
			}
			continue
		}
		for ctx.Err() == nil {
			n, err := l.conn.WaitForNotification(ctx)
			if err != nil {
				l.close() // broken (or stopping): connect again
				break
			}
			if n.Payload == workPayload {
				w.wake()
			}
		}
	}
}
