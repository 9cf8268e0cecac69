// Package queue is the team task queue of DESIGN.md §3: tasks with
// priorities and dependencies, claimed under leases with fencing tokens,
// stored in the team directory so that cat, jq and tail -f can read it.
//
// Files, in $POWERGLIDE_HOME/teams/<team>/:
//
//   - task-queue.json: the live tasks, one JSON document, replaced
//     atomically under the team lock so it parses at every instant. One
//     task per line, so a change rewrites the file without decoding the
//     other tasks.
//   - task-queue.idx: a binary cache of the scheduling fields of each live
//     task and the length of its line, checked against the generation,
//     inode, size and mtime of task-queue.json; rebuilt when stale (see
//     index.go).
//   - task-archive.jsonl: finished tasks moved out of the live file (by
//     Archive, Prune, or automatically once more than KeepFinished finished
//     tasks are live), so a long history never slows a claim.
//   - task-archive.idx: where each archived task's line is, a cache like
//     task-queue.idx.
//   - events.jsonl: one protocol.TaskEvent per change, appended before a
//     call returns; the header of task-queue.json keeps the events of the
//     last change until they are known to be there (see recover.go).
//   - lock: the flock every change holds.
//
// A claim is a lease with a fencing token that grows across the whole
// queue: Renew, Complete, Fail and Release must present it, and a stale
// token changes nothing (ErrLeaseLost). Every claim counts as an attempt;
// an expired lease makes the task claimable again, and a task whose
// attempts reached max_attempts fails instead of being claimed again.
package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
	"github.com/oklog/ulid/v2"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// Defaults.
const (
	DefaultLease        = 10 * time.Minute
	DefaultMaxAttempts  = 3
	DefaultKeepFinished = 500
)

// Queue is one team's queue. It is safe for concurrent use by goroutines
// and, through the team lock, by processes.
type Queue struct {
	dir teamdir.Dir

	// Now returns the current time; tests may replace it.
	Now func() time.Time
	// KeepFinished is how many finished tasks stay in task-queue.json
	// (where jq and dashboards see them); when there are more, the oldest
	// are moved to task-archive.jsonl. 0 means DefaultKeepFinished.
	KeepFinished int

	// NoSync skips the fsyncs after each change: changes stay atomic and
	// survive a killed process, but a power loss may lose the last ones.
	NoSync bool

	// Crash is for crash tests only; nil in production. When set, a change
	// calls it at the points between the files it touches ("prepared": the
	// archive is written, task-queue.json not yet replaced; "committed":
	// replaced; "archived": the archive rewrite of a prune is in place, the
	// journal not yet appended); true stops the change there, as a crash
	// would. A process-level test may kill its process in it instead.
	Crash func(point string) bool

	mu    sync.Mutex
	cache *state
}

// Open returns the queue of a team directory. It creates nothing: reads of
// a team without a directory see an empty queue, and the first change that
// succeeds creates the directory (see mutate).
func Open(dir teamdir.Dir) (*Queue, error) {
	if err := teamdir.ValidName("team", dir.Team); err != nil {
		return nil, err
	}
	return &Queue{dir: dir, Now: time.Now}, nil
}

// Dir is the team directory.
func (q *Queue) Dir() teamdir.Dir { return q.dir }

func (q *Queue) now() time.Time { return q.Now().UTC() }

func (q *Queue) keep() int {
	if q.KeepFinished > 0 {
		return q.KeepFinished
	}
	return DefaultKeepFinished
}

// current returns the cached state when task-queue.json has not changed
// since it was read, else reads it. Callers hold q.mu.
func (q *Queue) current() (*state, error) {
	if q.cache != nil {
		fi, err := os.Stat(q.dir.Queue())
		if err == nil && stampOf(fi) == q.cache.stat {
			return q.cache, nil
		}
		if err != nil && os.IsNotExist(err) && q.cache.stat == (fileStamp{}) {
			return q.cache, nil
		}
	}
	q.drop()
	s, err := load(q.dir.Path())
	if err != nil {
		return nil, err
	}
	q.cache = s
	return s, nil
}

// drop forgets the cached state.
func (q *Queue) drop() {
	q.cache.close()
	q.cache = nil
}

// Close releases the open task-queue.json the queue keeps between calls.
// The queue stays usable.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.drop()
	return nil
}

// view runs a read-only fn on a consistent state without taking the team
// lock: the file is replaced atomically, the state reads the version it
// opened, and the index is only used when it matches that version.
func (q *Queue) view(fn func(s *state) error) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	s, err := q.current()
	if err != nil {
		return err
	}
	return fn(s)
}

// change is what a mutation did.
type change struct {
	events []protocol.TaskEvent
	// rewrite, with archiveData, replaces task-archive.jsonl (a prune).
	rewrite     bool
	archiveData []byte
}

func (c *change) event(now time.Time, op string, t *protocol.Task, reason string) {
	ev := protocol.TaskEvent{Type: protocol.JournalTask, TS: now, Op: op, Task: t.ID, Status: t.Status, Reason: reason}
	if t.Claim != nil {
		ev.Worker, ev.Token = t.Claim.Worker, t.Claim.Token
	}
	c.events = append(c.events, ev)
}

// mutate runs fn on the current state under the team lock and, when it
// changed something, commits it: archives, replaces task-queue.json and
// appends the events. An error from fn leaves everything as it was.
func (q *Queue) mutate(fn func(s *state, now time.Time, c *change) error) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if done, err := q.create(fn); done || err != nil {
		return err
	}
	lk := flock.New(q.dir.Lock())
	if err := lk.Lock(); err != nil {
		return fmt.Errorf("lock %s: %w", q.dir.Lock(), err)
	}
	defer lk.Close()
	s, err := q.current()
	if err != nil {
		return err
	}
	if err := q.settle(s); err != nil {
		q.drop()
		return err
	}
	if err := q.trimArchive(s); err != nil {
		q.drop()
		return err
	}
	now := q.now()
	var c change
	if err := fn(s, now, &c); err != nil {
		q.drop() // fn may have changed entries before failing
		return err
	}
	if len(c.events) == 0 {
		return nil
	}
	if err := q.commit(s, now, &c); err != nil {
		q.drop()
		return err
	}
	if s.hdr.Generation%100 == 0 {
		q.sweepTemps()
	}
	if s.lazy != nil {
		q.drop() // a lazy state describes the version it read only
	}
	return nil
}

// create makes the team directory for the first change. Bad input must
// create nothing, so on a team without a directory the change is first
// tried on an empty queue, in memory: an error, or a change that changes
// nothing (done), ends the call there. Only a change that succeeds creates
// the directory; it is then run again, for real, under the lock, against
// whatever another process may have created meanwhile.
func (q *Queue) create(fn func(s *state, now time.Time, c *change) error) (done bool, err error) {
	if _, err := os.Stat(q.dir.Path()); !errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	var c change
	if err := fn(emptyState(), q.now(), &c); err != nil {
		return true, err
	}
	if len(c.events) == 0 {
		return true, nil
	}
	if err := q.dir.Ensure(); err != nil {
		return true, err
	}
	return false, nil
}

// sweepTemps removes temporary files left by writers that were killed
// mid-way. Every writer of those files holds the team lock, as the caller
// does, so any that exist now are garbage.
func (q *Queue) sweepTemps() {
	for _, base := range []string{teamdir.QueueFile, IndexFile, ArchiveFile, ArchiveIndexFile} {
		matches, _ := filepath.Glob(filepath.Join(q.dir.Path(), "."+base+".tmp-*"))
		for _, m := range matches {
			os.Remove(m)
		}
	}
	// Archive rewrites of prunes killed before their commit (the current
	// version is settled, so its own rewrite is in place).
	matches, _ := filepath.Glob(filepath.Join(q.dir.Path(), "."+ArchiveFile+".next-*"))
	for _, m := range matches {
		os.Remove(m)
	}
}

var errCrashed = errors.New("stopped by Queue.Crash")

// crashed reports whether a crash test stops the change at point.
func (q *Queue) crashed(point string) bool { return q.Crash != nil && q.Crash(point) }

// commit archives the oldest finished tasks beyond KeepFinished, replaces
// task-queue.json (the commit point; its header carries the events, see
// settle), then finishes the change: the archive rewrite of a prune, the
// journal, and the index, which marks the version settled.
func (q *Queue) commit(s *state, now time.Time, c *change) error {
	nfin := 0
	if s.lazy != nil {
		s.lazy.each(s.stat.size, false, func(_ int, e *entry, _ bool) bool {
			if finished(e.status) {
				nfin++
			}
			return true
		})
	} else {
		for _, e := range s.entries {
			if finished(e.status) {
				nfin++
			}
		}
	}
	if nfin > q.keep() {
		if err := s.all(); err != nil {
			return err
		}
		// Archive down to half the allowance, so this happens once per
		// KeepFinished/2 finished tasks, not on every one.
		var fins []int
		for i, e := range s.entries {
			if finished(e.status) {
				fins = append(fins, i)
			}
		}
		sortByUpdated(s, fins)
		move := map[int]bool{}
		for _, i := range fins[:nfin-q.keep()/2] {
			move[i] = true
		}
		if err := q.archiveEntries(s, move, now, c); err != nil {
			return err
		}
	}
	// The events are redacted once, here: task-queue.json keeps the same
	// bytes as events.jsonl, which recovery compares.
	var lines []byte
	raws := make([]json.RawMessage, len(c.events))
	for i := range c.events {
		b, err := jsonl.Marshal(&c.events[i])
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		b = secrets.Redact(b)
		lines = append(lines, b...)
		raws[i] = b[:len(b)-1]
	}
	var off int64
	if fi, err := os.Stat(q.dir.Events()); err == nil {
		off = fi.Size()
	}
	s.hdr.Journal = &pendingEvents{Offset: off, Events: raws}
	s.hdr.ArchiveRewrite = c.rewrite
	size := int64(len(c.archiveData))
	if !c.rewrite {
		var err error
		if size, err = q.archiveSize(); err != nil {
			return err
		}
	}
	s.hdr.ArchiveSize = &size
	gen := s.hdr.Generation + 1
	if c.rewrite {
		if err := q.writeArchiveNext(gen, c.archiveData); err != nil {
			return err
		}
	}
	if q.crashed("prepared") {
		return errCrashed
	}
	if err := s.save(q.dir.Path(), now, !q.NoSync); err != nil {
		if c.rewrite {
			os.Remove(filepath.Join(q.dir.Path(), archiveNextName(gen)))
		}
		return err
	}
	if q.crashed("committed") {
		return errCrashed
	}
	if c.rewrite {
		if err := q.finishArchiveRewrite(gen); err != nil {
			return fmt.Errorf("queue changed but %w", err)
		}
		q.indexRewritten(c.archiveData)
	}
	if q.crashed("archived") {
		return errCrashed
	}
	if err := jsonl.AppendRedacted(q.dir.Events(), lines); err != nil {
		return fmt.Errorf("queue changed but the journal append failed: %w", err)
	}
	s.settled = true
	s.writeIndex(q.dir.Path())
	return nil
}

// Add appends tasks, all or none. A task without an id gets t-<ULID>;
// depends_on may name live tasks, archived ones, or tasks of the same
// batch. Unknown dependencies, cycles, duplicate ids and invalid fields are
// *InputError. State fields of the input (status, attempts, claim, result,
// error, timestamps) are ignored: new tasks are pending.
func (q *Queue) Add(tasks []protocol.Task) ([]protocol.Task, error) {
	in := make([]protocol.Task, len(tasks))
	for i := range tasks {
		t, err := prepare(i, tasks[i])
		if err != nil {
			return nil, err
		}
		in[i] = t
	}
	if len(in) == 0 {
		return nil, nil
	}
	err := q.mutate(func(s *state, now time.Time, c *change) error {
		if err := s.all(); err != nil {
			return err
		}
		batch := make(map[string]int, len(in))
		given := map[string]bool{}
		for i := range in {
			if in[i].ID == "" {
				in[i].ID = "t-" + ulid.Make().String()
			} else {
				given[in[i].ID] = true
			}
			if j, dup := batch[in[i].ID]; dup {
				return inputErr(i, "task %s appears twice in the input (also task %d)", in[i].ID, j+1)
			}
			if _, live := s.index(in[i].ID); live {
				return inputErr(i, "task %s already exists", in[i].ID)
			}
			batch[in[i].ID] = i
		}
		// Ids to look up in the archive: given ids (must be new) and
		// dependencies not known otherwise.
		look := map[string]bool{}
		for id := range given {
			look[id] = true
		}
		for i := range in {
			for _, d := range in[i].DependsOn {
				if _, ok := batch[d]; ok {
					continue
				}
				if _, ok := s.statusOf(d); ok {
					continue
				}
				look[d] = true
			}
		}
		var archived map[string]*protocol.Task
		if len(look) > 0 {
			var err error
			if archived, err = q.scanArchive(look); err != nil {
				return err
			}
		}
		for i := range in {
			if _, ok := archived[in[i].ID]; ok && given[in[i].ID] {
				return inputErr(i, "task %s already exists (archived)", in[i].ID)
			}
			// A task pruned while live tasks depend on it: they must keep
			// seeing it, not a new task (which could close a cycle).
			if st, ok := s.hdr.FinishedDeps[in[i].ID]; ok && given[in[i].ID] {
				return inputErr(i, "task %s already exists (%s, then pruned; live tasks depend on it)", in[i].ID, st)
			}
			for _, d := range in[i].DependsOn {
				if _, ok := batch[d]; ok {
					continue
				}
				if _, ok := s.statusOf(d); ok {
					continue
				}
				a, ok := archived[d]
				if !ok {
					return inputErr(i, "task %s depends on unknown task %s", in[i].ID, d)
				}
				s.hdr.FinishedDeps[d] = a.Status
			}
		}
		if err := findCycle(in, batch); err != nil {
			return err
		}
		for i := range in {
			t := &in[i]
			t.Status = protocol.StatusPending
			t.CreatedAt, t.UpdatedAt = now, now
			raw, err := marshalTask(t)
			if err != nil {
				return err
			}
			s.entries = append(s.entries, newEntry(t, raw))
			c.event(now, "add", t, "")
		}
		s.byID = nil
		return nil
	})
	if err != nil {
		return nil, err
	}
	return in, nil
}

// prepare checks one input task and resets its state fields.
func prepare(i int, t protocol.Task) (protocol.Task, error) {
	t.Title = strings.TrimSpace(t.Title)
	if t.Title == "" {
		t.Title = defaultTitle(t.Prompt)
	}
	if t.Title == "" {
		return t, inputErr(i, "task needs a title (or a prompt)")
	}
	if t.ID != "" {
		if err := teamdir.ValidName("task id", t.ID); err != nil {
			return t, inputErr(i, "%v", err)
		}
	}
	if t.MaxAttempts == 0 {
		t.MaxAttempts = DefaultMaxAttempts
	}
	if t.MaxAttempts < 0 {
		return t, inputErr(i, "max_attempts must be at least 1, got %d", t.MaxAttempts)
	}
	seen := map[string]bool{}
	deps := []string{}
	for _, d := range t.DependsOn {
		d = strings.TrimSpace(d)
		if d == "" {
			return t, inputErr(i, "depends_on holds an empty id")
		}
		if t.ID != "" && d == t.ID {
			return t, inputErr(i, "task %s depends on itself", t.ID)
		}
		if !seen[d] {
			seen[d] = true
			deps = append(deps, d)
		}
	}
	t.DependsOn = deps
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Status, t.Attempts, t.Claim, t.Result, t.Error, t.Blocked = protocol.StatusPending, 0, nil, nil, nil, false
	return t, nil
}

// defaultTitle is the first line of the prompt, up to 80 bytes (never
// cutting a character in two).
func defaultTitle(prompt string) string {
	return strings.TrimSpace(termtext.Cut(termtext.FirstLine(prompt), 80))
}

// findCycle reports a dependency cycle among the new tasks (old tasks
// cannot depend on new ones, so a cycle lies within the batch).
func findCycle(in []protocol.Task, batch map[string]int) error {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(in))
	var path []string
	var visit func(i int) error
	visit = func(i int) error {
		color[i] = grey
		path = append(path, in[i].ID)
		for _, d := range in[i].DependsOn {
			j, ok := batch[d]
			if !ok {
				continue
			}
			switch color[j] {
			case grey:
				start := 0
				for k, id := range path {
					if id == d {
						start = k
					}
				}
				cyc := append(append([]string{}, path[start:]...), d)
				return inputErr(j, "dependency cycle: %s", strings.Join(cyc, " -> "))
			case white:
				if err := visit(j); err != nil {
					return err
				}
			}
		}
		path = path[:len(path)-1]
		color[i] = black
		return nil
	}
	for i := range in {
		if color[i] == white {
			if err := visit(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// better orders claim candidates: higher priority, then older.
func better(a, b *entry) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	return a.created < b.created
}

// MaxLease bounds a lease: 100 years. A claim's expiry is kept in Unix
// nanoseconds, which overflow in the year 2262, and a lease past that once
// counted as expired at once, so a second worker got the same task.
const MaxLease = 100 * 365 * 24 * time.Hour

// checkLease gives DefaultLease for lease ≤ 0 and refuses one past MaxLease.
func checkLease(lease time.Duration) (time.Duration, error) {
	if lease <= 0 {
		return DefaultLease, nil
	}
	if lease > MaxLease {
		return 0, &InputError{Index: -1, Msg: fmt.Sprintf("lease %s is out of range: at most %s (100 years)", lease, MaxLease)}
	}
	return lease, nil
}

// Claim leases the highest-priority, then oldest, claimable task to worker
// for lease (DefaultLease when ≤ 0; at most MaxLease) and returns it with its claim. A task
// is claimable when it is pending with every dependency done, or claimed
// under an expired lease. Tasks out of attempts fail on the way. ErrNothing
// when no task is claimable.
func (q *Queue) Claim(worker string, lease time.Duration) (*protocol.Task, error) {
	return q.claim(worker, lease, "")
}

// claim is Claim that records the claim id id (none when empty).
func (q *Queue) claim(worker string, lease time.Duration, id string) (*protocol.Task, error) {
	if err := teamdir.ValidName("worker", worker); err != nil {
		return nil, &InputError{Index: -1, Msg: err.Error()}
	}
	if err := CheckClaimID(id); err != nil {
		return nil, err
	}
	lease, err := checkLease(lease)
	if err != nil {
		return nil, err
	}
	var out *protocol.Task
	err = q.mutate(func(s *state, now time.Time, c *change) error {
		nowNs := now.UnixNano()
		best, bestE := -1, entry{}
		var spent []int    // out of attempts
		var spentE []entry // their entries
		consider := func(i int, e *entry) {
			switch e.status {
			case stPending:
				if len(e.deps) > 0 && !s.depsDone(e) {
					return
				}
			case stClaimed:
				if e.until > nowNs {
					return
				}
			default:
				return
			}
			if e.attempts >= e.maxAttempts {
				spent, spentE = append(spent, i), append(spentE, *e)
				return
			}
			if best < 0 || better(e, &bestE) {
				best, bestE = i, *e
			}
		}
		// Walk the index in place unless a pending task has dependencies,
		// whose status needs the decoded entries.
		decode := s.lazy == nil
		if s.lazy != nil {
			stopped := false
			ok := s.lazy.each(s.stat.size, false, func(i int, e *entry, hasDeps bool) bool {
				if hasDeps && e.status == stPending {
					stopped = true
					return false
				}
				consider(i, e)
				return true
			})
			decode = !ok || stopped
		}
		if decode {
			best, spent, spentE = -1, nil, nil
			if err := s.all(); err != nil {
				return err
			}
			for i, e := range s.entries {
				consider(i, e)
			}
		}
		for k, i := range spent {
			if err := q.exhaust(s, i, &spentE[k], now, c); err != nil {
				return err
			}
		}
		if best < 0 {
			return nil
		}
		t, err := s.task(&bestE)
		if err != nil {
			return err
		}
		if t.Status == protocol.StatusClaimed {
			c.event(now, "expire", t, "lease expired at "+t.Claim.Until.Format(time.RFC3339))
			c.events[len(c.events)-1].Status = protocol.StatusPending
		}
		t.Status = protocol.StatusClaimed
		t.Attempts++
		t.Claim = &protocol.Claim{Worker: worker, Token: s.hdr.NextToken, Until: now.Add(lease), ID: id}
		s.hdr.NextToken++
		t.UpdatedAt = now
		if err := s.put(best, t); err != nil {
			return err
		}
		c.event(now, "claim", t, "")
		out = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, ErrNothing
	}
	return out, nil
}

// exhaust fails a task that has used all its attempts.
func (q *Queue) exhaust(s *state, i int, e *entry, now time.Time, c *change) error {
	t, err := s.task(e)
	if err != nil {
		return err
	}
	msg := ExhaustMessage(t)
	t.Status, t.Error, t.UpdatedAt = protocol.StatusFailed, &msg, now
	if err := s.put(i, t); err != nil {
		return err
	}
	c.event(now, "expire", t, msg)
	return nil
}

// WaitClaim is Claim that waits up to wait for a claimable task, looking
// again whenever task-queue.json changes and at least every second (leases
// expire with time alone). It returns ErrNothing when wait ran out, and the
// context's error when ctx ends.
func (q *Queue) WaitClaim(ctx context.Context, worker string, lease, wait time.Duration) (*protocol.Task, error) {
	deadline := time.Now().Add(wait)
	id := ClaimID(ctx)
	for {
		t, err := q.claim(worker, lease, id)
		if !errors.Is(err, ErrNothing) || !time.Now().Before(deadline) {
			return t, err
		}
		last := statStamp(q.dir.Queue())
		retry := time.Now().Add(time.Second)
		for {
			d := 25 * time.Millisecond
			if rem := time.Until(deadline); rem < d {
				d = rem
			}
			if d <= 0 {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(d):
			}
			if statStamp(q.dir.Queue()) != last || time.Now().After(retry) {
				break
			}
		}
	}
}

func statStamp(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return stampOf(fi)
}

// held finds the task a token must hold. A stale token is ErrLeaseLost
// naming who holds the task now.
func held(s *state, id string, token int64) (int, *protocol.Task, error) {
	i, e, err := s.find(id)
	if err != nil {
		return 0, nil, err
	}
	if e == nil {
		return 0, nil, notFound(id)
	}
	t, err := s.task(e)
	if err != nil {
		return 0, nil, err
	}
	if t.Status == protocol.StatusClaimed && t.Claim != nil && t.Claim.Token == token {
		return i, t, nil
	}
	return 0, t, leaseLost(t, token)
}

func leaseLost(t *protocol.Task, token int64) error {
	var now string
	switch {
	case t.Status == protocol.StatusClaimed && t.Claim != nil:
		now = fmt.Sprintf("worker %s holds it with token %d", t.Claim.Worker, t.Claim.Token)
	case t.Claim != nil && t.Status != protocol.StatusPending:
		now = fmt.Sprintf("it is %s (token %d)", t.Status, t.Claim.Token)
	default:
		now = "it is " + t.Status
	}
	return fmt.Errorf("task %s: %w: token %d is not the current claim, %s", t.ID, ErrLeaseLost, token, now)
}

// Renew extends the lease of a held task to now+lease.
func (q *Queue) Renew(id string, token int64, lease time.Duration) (*protocol.Task, error) {
	lease, err := checkLease(lease)
	if err != nil {
		return nil, err
	}
	var out *protocol.Task
	err = q.mutate(func(s *state, now time.Time, c *change) error {
		i, t, err := held(s, id, token)
		if err != nil {
			return err
		}
		t.Claim.Until, t.UpdatedAt = now.Add(lease), now
		if err := s.put(i, t); err != nil {
			return err
		}
		c.event(now, "renew", t, "")
		out = t
		return nil
	})
	return out, err
}

// Complete marks a held task done with its result (any JSON nested at most
// MaxDepth-3 levels, so task-queue.json stays readable by jq; nil is null).
// Completing again with the same token is a harmless success that changes
// nothing.
func (q *Queue) Complete(id string, token int64, result json.RawMessage) (*protocol.Task, error) {
	if err := CheckResult(result); err != nil {
		return nil, err
	}
	var out *protocol.Task
	err := q.mutate(func(s *state, now time.Time, c *change) error {
		i, t, err := held(s, id, token)
		if errors.Is(err, ErrNotFound) {
			// Finished and archived since: a repeat is still harmless.
			a, aerr := q.scanArchive(map[string]bool{id: true})
			if aerr != nil {
				return aerr
			}
			if t = a[id]; t == nil {
				return err
			}
			err = leaseLost(t, token)
		}
		if err != nil {
			if t != nil && t.Status == protocol.StatusDone && t.Claim != nil && t.Claim.Token == token {
				out = t
				return nil
			}
			return err
		}
		t.Status, t.UpdatedAt, t.Error = protocol.StatusDone, now, nil
		t.Result = compact(result)
		if err := s.put(i, t); err != nil {
			return err
		}
		c.event(now, "complete", t, "")
		out = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func compact(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// Fail records msg as the task's error. With retry, the task goes back to
// pending when it has attempts left; otherwise it fails.
func (q *Queue) Fail(id string, token int64, msg string, retry bool) (*protocol.Task, error) {
	var out *protocol.Task
	err := q.mutate(func(s *state, now time.Time, c *change) error {
		i, t, err := held(s, id, token)
		if err != nil {
			return err
		}
		m, worker := msg, t.Claim.Worker
		t.Error, t.UpdatedAt = &m, now
		if retry && t.Attempts < t.MaxAttempts {
			t.Status, t.Claim = protocol.StatusPending, nil
		} else {
			t.Status = protocol.StatusFailed
		}
		if err := s.put(i, t); err != nil {
			return err
		}
		c.event(now, "fail", t, msg)
		if t.Status == protocol.StatusPending {
			c.events[len(c.events)-1].Worker, c.events[len(c.events)-1].Token = worker, token
		}
		out = t
		return nil
	})
	return out, err
}

// Release hands a held task back: it is pending again. The attempt it used
// still counts.
func (q *Queue) Release(id string, token int64) (*protocol.Task, error) {
	return q.release(id, token, false, "")
}

// Unclaim takes back a claim that never reached its worker (pg-queue claim
// could not write the task record): the task is pending again, and the
// attempt is given back, since no work was done. reason goes in the journal.
func (q *Queue) Unclaim(id string, token int64, reason string) (*protocol.Task, error) {
	return q.release(id, token, true, reason)
}

func (q *Queue) release(id string, token int64, refund bool, reason string) (*protocol.Task, error) {
	var out *protocol.Task
	err := q.mutate(func(s *state, now time.Time, c *change) error {
		i, t, err := held(s, id, token)
		if err != nil {
			return err
		}
		worker := t.Claim.Worker
		t.Status, t.Claim, t.UpdatedAt = protocol.StatusPending, nil, now
		if refund && t.Attempts > 0 {
			t.Attempts--
		}
		if err := s.put(i, t); err != nil {
			return err
		}
		c.event(now, "release", t, reason)
		c.events[len(c.events)-1].Worker, c.events[len(c.events)-1].Token = worker, token
		out = t
		return nil
	})
	return out, err
}

// ReleaseWorker releases the tasks claimed by worker: for a supervisor
// that stopped the worker. With before > 0, only claims whose token is
// below it: a supervisor that notes Stats().NextToken when the worker
// stopped leaves alone the claims of a restarted worker of the same name.
// It returns the released tasks.
func (q *Queue) ReleaseWorker(worker, reason string, before int64) ([]protocol.Task, error) {
	var out []protocol.Task
	err := q.mutate(func(s *state, now time.Time, c *change) error {
		if err := s.all(); err != nil {
			return err
		}
		for i, e := range s.entries {
			if e.status != stClaimed || e.worker != worker || (before > 0 && e.token >= before) {
				continue
			}
			t, err := s.task(e)
			if err != nil {
				return err
			}
			token := t.Claim.Token
			t.Status, t.Claim, t.UpdatedAt = protocol.StatusPending, nil, now
			if err := s.put(i, t); err != nil {
				return err
			}
			c.event(now, "release", t, reason)
			c.events[len(c.events)-1].Worker, c.events[len(c.events)-1].Token = worker, token
			out = append(out, *t)
		}
		return nil
	})
	return out, err
}

// Cancel cancels a pending or claimed task; a worker holding it then gets
// ErrLeaseLost. Cancelling a cancelled task is a harmless success; a done
// or failed task is ErrFinished.
func (q *Queue) Cancel(id, reason string) (*protocol.Task, error) {
	ts, err := q.CancelAll([]string{id}, reason)
	if err != nil {
		return nil, err
	}
	return &ts[0], nil
}

// CancelAll cancels several tasks, all or none: an unknown id
// (ErrNotFound) or a done or failed task (ErrFinished) changes nothing. It
// returns the tasks in the order of ids.
func (q *Queue) CancelAll(ids []string, reason string) ([]protocol.Task, error) {
	var out []protocol.Task
	err := q.mutate(func(s *state, now time.Time, c *change) error {
		if err := s.all(); err != nil {
			return err
		}
		out = out[:0]
		for _, id := range ids {
			i, ok := s.index(id)
			if !ok {
				if a, err := q.scanArchive(map[string]bool{id: true}); err == nil && a[id] != nil {
					return fmt.Errorf("task %s: %w: it is %s (archived)", id, ErrFinished, a[id].Status)
				}
				return notFound(id)
			}
			t, err := s.task(s.entries[i])
			if err != nil {
				return err
			}
			switch t.Status {
			case protocol.StatusCancelled:
				out = append(out, *t)
				continue
			case protocol.StatusDone, protocol.StatusFailed:
				return fmt.Errorf("task %s: %w: it is %s", id, ErrFinished, t.Status)
			}
			t.Status, t.UpdatedAt = protocol.StatusCancelled, now
			if reason != "" {
				r := reason
				t.Error = &r
			}
			if err := s.put(i, t); err != nil {
				return err
			}
			c.event(now, "cancel", t, reason)
			out = append(out, *t)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListOptions filter List.
type ListOptions struct {
	Status   []string // keep tasks with one of these statuses; "blocked" selects blocked pending tasks
	Worker   string   // keep tasks claimed by this worker
	Archived bool     // include task-archive.jsonl (first, oldest first); read only when the filter can keep a finished task
}

// List returns the live tasks in queue order (and the archived ones with
// Archived). Pending tasks whose dependencies are not all done have
// Blocked set.
func (q *Queue) List(opts ListOptions) ([]protocol.Task, error) {
	if err := CheckStatuses(opts.Status); err != nil {
		return nil, err
	}
	var out []protocol.Task
	err := q.view(func(s *state) error {
		out = nil
		return q.list(s, opts, &out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (q *Queue) list(s *state, opts ListOptions, out *[]protocol.Task) error {
	if err := s.all(); err != nil {
		return err
	}
	want := func(t *protocol.Task) bool {
		if opts.Worker != "" && (t.Claim == nil || t.Claim.Worker != opts.Worker || t.Status != protocol.StatusClaimed) {
			return false
		}
		if len(opts.Status) == 0 {
			return true
		}
		for _, st := range opts.Status {
			if st == t.Status || (st == "blocked" && t.Blocked) {
				return true
			}
		}
		return false
	}
	// A cheap look at the index fields before decoding a task.
	maybe := func(e *entry) bool {
		if opts.Worker != "" && (e.status != stClaimed || e.worker != opts.Worker) {
			return false
		}
		if len(opts.Status) == 0 {
			return true
		}
		for _, st := range opts.Status {
			if st == statusNames[e.status] || (st == "blocked" && e.status == stPending) {
				return true
			}
		}
		return false
	}
	if opts.Archived && archivable(opts) {
		live := map[string]bool{}
		for _, e := range s.entries {
			live[e.id] = true
		}
		var arch []protocol.Task
		err := q.eachArchived(func(t *protocol.Task) {
			if !live[t.ID] && want(t) {
				arch = append(arch, *t)
			}
		})
		if err != nil {
			return err
		}
		*out = dedupeLast(arch)
	}
	if err := s.readAll(); err != nil {
		return err
	}
	for _, e := range s.entries {
		if !maybe(e) {
			continue
		}
		t, err := s.task(e)
		if err != nil {
			return err
		}
		t.Blocked = e.status == stPending && !s.depsDone(e)
		if want(t) {
			*out = append(*out, *t)
		}
	}
	return nil
}

// archivable reports whether archived tasks, all finished and none
// claimed, can pass the filter: when they cannot, the archive is not read.
func archivable(opts ListOptions) bool {
	if opts.Worker != "" {
		return false
	}
	if len(opts.Status) == 0 {
		return true
	}
	for _, st := range opts.Status {
		if c, ok := statusCode(st); ok && finished(c) {
			return true
		}
	}
	return false
}

// dedupeLast keeps the last copy of each id (the archive may hold a task
// twice after a crash between archiving and rewriting the live file).
func dedupeLast(ts []protocol.Task) []protocol.Task {
	last := map[string]int{}
	for i, t := range ts {
		last[t.ID] = i
	}
	if len(last) == len(ts) {
		return ts
	}
	out := ts[:0]
	for i, t := range ts {
		if last[t.ID] == i {
			out = append(out, t)
		}
	}
	return out
}

// Show returns one task, live or archived.
func (q *Queue) Show(id string) (*protocol.Task, error) {
	var out *protocol.Task
	err := q.view(func(s *state) error {
		if err := s.all(); err != nil {
			return err
		}
		i, ok := s.index(id)
		if !ok {
			return nil
		}
		e := s.entries[i]
		t, err := s.task(e)
		if err != nil {
			return err
		}
		t.Blocked = e.status == stPending && !s.depsDone(e)
		out = t
		return nil
	})
	if err != nil || out != nil {
		return out, err
	}
	a, err := q.scanArchive(map[string]bool{id: true})
	if err != nil {
		return nil, err
	}
	if t := a[id]; t != nil {
		return t, nil
	}
	return nil, notFound(id)
}
