// Package store is where a team's shared state lives: its tasks, its
// journal, its worker records and its budget ledger. Two stores implement
// it with the same semantics (DESIGN.md §3, issue 17):
//
//   - the team directory under $POWERGLIDE_HOME (flock-guarded files that
//     cat, jq and tail -f read), the default and the embedded one;
//   - PostgreSQL, for a team whose workers run on several hosts.
//
// Open picks one from a URL (--store, POWERGLIDE_STORE, config key store):
// "" or "file:" is the team directory, "postgres://…" (or "postgresql://…",
// or a libpq keyword string such as "host=db dbname=pg") is PostgreSQL.
// Callers hold a Store and know nothing of which one it is.
//
// Errors keep the meanings the tools map to exit codes: queue.ErrNotFound,
// queue.ErrLeaseLost, queue.ErrFinished, queue.ErrNothing and
// *queue.InputError from Tasks; fs.ErrNotExist from a missing worker
// record or budget; an error whose BadInput() is true is bad input (exit 2).
// Anything else is the store being unreachable or broken (exit 1, or 3
// where DESIGN.md §4 names it).
package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
)

// Store holds every team of one $POWERGLIDE_HOME or one database.
type Store interface {
	// Team returns one team's state. It creates nothing: reads of a team
	// that does not exist see it empty, and the first change creates it.
	// An invalid team name is bad input.
	Team(name string) (Team, error)
	// Kind is "file" or "postgres": for messages, for records' host
	// fields and for Shared, never for branching on semantics.
	Kind() string
	// Close releases connections and cached files.
	Close() error
}

// Shared reports whether several hosts may share s (PostgreSQL): a worker
// record's host name then does not make it this host's, only its host_id
// does (proc.Host.Shared). The team directory is one host's.
func Shared(s Store) bool { return s.Kind() != "file" }

// Team is one team's state.
type Team interface {
	Name() string
	Tasks() Tasks
	Journal() Journal
	Workers() Workers
	Budget() Budget
	// Exists reports an error wrapping fs.ErrNotExist when the team has
	// never been written to (no task, no worker, no budget).
	Exists(ctx context.Context) error
}

// Tasks is the task queue: the methods and semantics of *queue.Queue,
// which is the file store's implementation.
type Tasks interface {
	Add(tasks []protocol.Task) ([]protocol.Task, error)
	Claim(worker string, lease time.Duration) (*protocol.Task, error)
	WaitClaim(ctx context.Context, worker string, lease, wait time.Duration) (*protocol.Task, error)
	Renew(id string, token int64, lease time.Duration) (*protocol.Task, error)
	Complete(id string, token int64, result json.RawMessage) (*protocol.Task, error)
	Fail(id string, token int64, msg string, retry bool) (*protocol.Task, error)
	Release(id string, token int64) (*protocol.Task, error)
	Unclaim(id string, token int64, reason string) (*protocol.Task, error)
	ReleaseWorker(worker, reason string, before int64) ([]protocol.Task, error)
	Cancel(id, reason string) (*protocol.Task, error)
	CancelAll(ids []string, reason string) ([]protocol.Task, error)
	List(opts queue.ListOptions) ([]protocol.Task, error)
	Show(id string) (*protocol.Task, error)
	Stats() (*protocol.QueueStats, error)
	Archive(olderThan time.Duration) (int, error)
	Prune(olderThan time.Duration) (int, error)
}

// Journal is the team's event log (events.jsonl on files): task events,
// worker events and operator events, each one JSON object.
type Journal interface {
	// Append adds records (each marshalled to one JSON object) in order.
	Append(ctx context.Context, records ...any) error
	// Follow returns the records appended after the call, or all of them
	// with fromStart, in order, with nothing lost or repeated, until ctx
	// ends or the Follower is closed.
	Follow(ctx context.Context, fromStart bool) (Follower, error)
}

// Follower yields journal records one at a time.
type Follower interface {
	// Next blocks until the next record and returns it as one line of
	// JSON without its newline. It returns ctx's error when ctx ends.
	Next(ctx context.Context) ([]byte, error)
	Close() error
}

// Workers are the team's worker records (worker-N.json on files).
type Workers interface {
	// Read returns one record, or an error wrapping fs.ErrNotExist.
	Read(ctx context.Context, worker string) (*protocol.Worker, error)
	// Update reads the record (nil when there is none), lets fn change it,
	// and writes what fn returns, all while no other Update of the same
	// worker runs, on any host. fn returning nil writes nothing.
	Update(ctx context.Context, worker string, fn func(old *protocol.Worker) (*protocol.Worker, error)) (*protocol.Worker, error)
	// Write replaces a record without reading it.
	Write(ctx context.Context, rec *protocol.Worker) error
	// List returns every record, sorted as teamdir.WorkerLess sorts names;
	// unreadable records come back as errors beside the good ones.
	List(ctx context.Context) ([]*protocol.Worker, []error)
	// Velocity returns the operator's velocity setting for a worker (the
	// worker-N.velocity file on files): 1 when none was set, 0 for paused.
	Velocity(ctx context.Context, worker string) (float64, error)
	// SetVelocity records the operator's velocity setting for a worker.
	SetVelocity(ctx context.Context, worker string, v float64) error
	// Answer records the answer to the approval a worker waits on (pg-loop
	// approve, pg-dash), from any host that reaches the store, once the
	// worker's record shows that call waiting: otherwise the error wraps
	// teamdir.ErrNoApproval, or fs.ErrNotExist when there is no such
	// worker.
	Answer(ctx context.Context, a protocol.ApprovalAnswer) error
	// TakeAnswer returns the answer to the worker's call and removes it;
	// ok is false while there is none (an answer to an older call is not
	// one).
	TakeAnswer(ctx context.Context, worker, call string) (a protocol.ApprovalAnswer, ok bool, err error)
}

// Budget is the team's budget ledger (budget.json on files). pkg/ledger
// keeps the rules (reserve, settle, expire); the store keeps the document.
type Budget interface {
	// Read returns the ledger, or an error wrapping fs.ErrNotExist when no
	// team budget was ever set.
	Read(ctx context.Context) (*protocol.TeamBudget, error)
	// Update reads the ledger (nil when there is none), lets fn change it,
	// and writes what fn returns, while no other Update of this team's
	// ledger runs, on any host. fn returning nil writes nothing.
	Update(ctx context.Context, fn func(old *protocol.TeamBudget) (*protocol.TeamBudget, error)) (*protocol.TeamBudget, error)
}
