// Package filestore is the team store of DESIGN.md §3: each team is a
// directory under $POWERGLIDE_HOME/teams/ holding flock-guarded files that
// cat, jq and tail -f read. It implements store.Store with the files and
// behaviour the tools always had:
//
//   - Tasks: the queue of package queue (task-queue.json, the archive);
//   - Journal: events.jsonl, appended under its flock, followed like tail -F;
//   - Workers: worker-<n>.json, replaced atomically, read-modify-writes
//     serialized by worker-<n>.json.lock; worker-<n>.velocity;
//   - Budget: budget.json, changed under the team lock (the queue's).
package filestore

import (
	"context"
	"fmt"
	"sync"

	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// Options tune the store's queues.
type Options struct {
	// NoSync skips the queue's fsyncs (config queue_sync false).
	NoSync bool
	// KeepFinished is how many finished tasks stay in task-queue.json
	// (config queue_keep_finished); 0 is queue.DefaultKeepFinished.
	KeepFinished int
	// Crash is the queue's crash-test hook (queue.Queue.Crash); nil in
	// production.
	Crash func(point string) bool
	// OnSettleError hears, from a journal follower, that the queue could
	// not be settled (see queue.SettleWhenQuiet); nil ignores it.
	OnSettleError func(error)
}

// Store holds the teams of one data root.
type Store struct {
	home string
	opts Options

	mu    sync.Mutex
	teams map[string]*Team
}

// Open returns the store of the data root home. It creates nothing.
func Open(home string, opts Options) *Store {
	return &Store{home: home, opts: opts, teams: map[string]*Team{}}
}

var _ store.Store = (*Store)(nil)

// Home is the data root.
func (s *Store) Home() string { return s.home }

// Kind is "file".
func (s *Store) Kind() string { return "file" }

// Team returns a team's state; an invalid name is bad input, and so is a
// team directory that another user could change (teamdir.Dir.Check).
func (s *Store) Team(name string) (store.Team, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.teams[name]; t != nil {
		return t, nil
	}
	d, err := teamdir.New(s.home, name)
	if err != nil {
		return nil, &inputError{err}
	}
	if err := d.Check(); err != nil {
		return nil, err
	}
	q, err := queue.Open(d)
	if err != nil {
		return nil, &inputError{err}
	}
	q.NoSync = s.opts.NoSync
	q.KeepFinished = s.opts.KeepFinished
	q.Crash = s.opts.Crash
	t := &Team{dir: d, q: q, onSettle: s.opts.OnSettleError}
	s.teams[name] = t
	return t, nil
}

// Close releases the queues' open files.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.teams {
		t.q.Close()
	}
	return nil
}

// Team is one team directory.
type Team struct {
	dir      teamdir.Dir
	q        *queue.Queue
	onSettle func(error)
}

var _ store.Team = (*Team)(nil)

// Name is the team's name.
func (t *Team) Name() string { return t.dir.Team }

// Dir is the team directory.
func (t *Team) Dir() teamdir.Dir { return t.dir }

// Tasks is the team's queue.
func (t *Team) Tasks() store.Tasks { return t.q }

// Journal is events.jsonl.
func (t *Team) Journal() store.Journal { return &Journal{team: t} }

// Workers are worker-<n>.json.
func (t *Team) Workers() store.Workers { return &Workers{dir: t.dir} }

// Budget is budget.json.
func (t *Team) Budget() store.Budget { return &Budget{dir: t.dir} }

// Exists reports whether the team directory is there.
func (t *Team) Exists(context.Context) error { return t.dir.Exists() }

// inputError is bad input: an invalid team or worker name.
type inputError struct{ err error }

func (e *inputError) Error() string  { return e.err.Error() }
func (e *inputError) Unwrap() error  { return e.err }
func (e *inputError) BadInput() bool { return true }

func badInput(format string, a ...any) error { return &inputError{fmt.Errorf(format, a...)} }
