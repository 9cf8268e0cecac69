package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/filestore"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/workermark"
)

// Files of the monitor inside the team directory. monitor.lock is its own
// flock target, separate from the queue's lock: the monitor calls pg-queue
// while holding it.
const (
	LockFile  = "monitor.lock"
	StateFile = "monitor.json"
)

// Monitor actions recorded in events.jsonl.
const (
	ActSpawn      = "spawn"
	ActRestart    = "restart"
	ActSigterm    = "sigterm"
	ActSigkill    = "sigkill"
	ActRelease    = "release"
	ActBudgetStop = "budget_stop"
	ActDone       = "done"
	ActGiveUp     = "give_up"
	// ActNotSignalled is a stale or stuck worker left running because
	// its process carries no worker mark (package workermark): the
	// record alone does not prove that the pid is the team's worker.
	ActNotSignalled = "not_signalled"
)

// State is what the watchers share in monitor.json: the kills in flight
// and the dead incarnations whose tasks were already released. It is read
// and replaced only under monitor.lock.
type State struct {
	Kills map[string]*Kill  `json:"kills"` // by worker name
	Dead  map[string]string `json:"dead"`  // worker name -> "pid/start" whose tasks were released
	// Unmarked: worker name -> "pid/start" left running for want of a
	// worker mark, already reported (once per process, not every pass).
	Unmarked map[string]string `json:"unmarked,omitempty"`
}

// Kill is a stop in progress: SIGTERM sent at TermAt, SIGKILL meant at
// KillAt (zero until then) and sent when KillSent. Members are the
// processes of the worker's group seen
// while its leader lived: when the leader ends first, they prove that the
// group still left is the same one (see proc.Signaler.SignalLeftovers).
type Kill struct {
	PID      int           `json:"pid"`
	PIDStart string        `json:"pid_start"`
	PGID     int           `json:"pgid,omitempty"` // as the worker record had them
	SID      int           `json:"sid,omitempty"`
	TermAt   time.Time     `json:"term_at"`
	KillAt   time.Time     `json:"kill_at,omitzero"`
	KillSent bool          `json:"kill_sent,omitempty"`
	Reason   string        `json:"reason"`
	Members  []proc.Member `json:"members,omitempty"`
	// Marked: the worker's mark was checked before the SIGTERM. What is
	// left of its group after it ended (its mark gone with it) is
	// signalled only then.
	Marked bool `json:"marked,omitempty"`
}

// target is the process of a worker record as the signals check it: its
// start time, and its group and session when the record has them.
func target(r *protocol.Worker) proc.Target {
	return proc.Target{PID: r.PID, Start: r.PIDStart, PGID: r.PGID, SID: r.SID}
}

func (k *Kill) target() proc.Target {
	return proc.Target{PID: k.PID, Start: k.PIDStart, PGID: k.PGID, SID: k.SID}
}

// killDue says whether a kill in flight needs its SIGKILL now: the grace
// period after SIGTERM is over and none was meant yet, or one was meant
// killRetry ago but never recorded as sent. The intent is saved before
// the signal and KillSent after it, so the watcher that saved it died in
// between; without a second try the worker would run on. A SIGKILL that
// was sent is never repeated, even when the process outlives it (a
// process in uninterruptible sleep): the kill stays in flight.
func (w *Watcher) killDue(k *Kill, now time.Time) (due, again bool) {
	switch {
	case k.KillAt.IsZero():
		return now.Sub(k.TermAt) >= w.Opts.Grace, false
	case k.KillSent:
		return false, false
	}
	return now.Sub(k.KillAt) >= max(w.Opts.Grace, killRetry), true
}

// killRetry is how long a SIGKILL meant but not recorded as sent waits
// before the next watcher sends it.
const killRetry = 2 * time.Second

func killAgain(again bool, meant time.Time) string {
	if !again {
		return ""
	}
	return fmt.Sprintf("a SIGKILL meant at %s was never sent (its watcher died); ", meant.UTC().Format(time.RFC3339))
}

// sigkill sends the SIGKILL of kill k, which killDue found due (again: a
// SIGKILL meant before was never recorded as sent). It writes ahead: the
// intent is saved in monitor.json before send runs, so a watcher killed in
// between never leads to a second SIGKILL, except when its signal never
// went out (see killDue). A failed send is one of the pass's errors, named
// by what, and leaves the kill to be tried again; a signal that went out
// is a sigkill event with why as its reason. The error returned is the
// state's that could not be saved, which ends the pass.
func (w *Watcher) sigkill(res *Result, st *State, name string, k *Kill, now time.Time, again bool, why, what string, send func() (bool, error)) (sent bool, err error) {
	prev := k.KillAt
	k.KillAt = now
	if err := w.saveState(st); err != nil {
		return false, err
	}
	sent, serr := send()
	if serr != nil {
		res.Errors = append(res.Errors, fmt.Errorf("%s: %w", what, serr))
		k.KillAt = time.Time{}
		return false, nil
	}
	k.KillSent = true
	if sent {
		w.emit(res, protocol.MonitorEvent{Action: ActSigkill, Worker: name, PID: k.PID, Reason: killAgain(again, prev) + why})
	}
	return sent, nil
}

// Status is one worker as `pg-monitor status` and a watch pass see it.
type Status = protocol.WorkerStatus

// Watcher runs watch passes over one team.
type Watcher struct {
	// Dir is the team's directory on this host: the monitor's own lock
	// and state (monitor.lock, monitor.json) and the workers' logs live
	// there, whatever the store.
	Dir teamdir.Dir
	// Team is the team's store: worker records and journal. nil is the
	// team directory Dir (the file store).
	Team  store.Team
	Queue Queue
	Opts  Options
	Host  proc.Host        // this host: records of another are never checked or signalled (proc.Host.Owns)
	Now   func() time.Time // nil: time.Now
	// Signals checks and sends every signal of a pass; nil: proc.Default.
	// Tests give one with a recording Sender.
	Signals *proc.Signaler

	teamOnce sync.Once
}

// team is the team's store.
func (w *Watcher) team() store.Team {
	w.teamOnce.Do(func() {
		if w.Team == nil {
			w.Team, _ = filestore.Open(w.Dir.Home, filestore.Options{}).Team(w.Dir.Team)
		}
	})
	return w.Team
}

func (w *Watcher) signals() *proc.Signaler {
	if w.Signals != nil {
		return w.Signals
	}
	return proc.Default
}

func (w *Watcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// Probe finds out whether the process of record r is still there.
func (w *Watcher) Probe(r *protocol.Worker) Process { return w.probe(&reader{}, r) }

func (w *Watcher) probe(rd *reader, r *protocol.Worker) Process {
	// A malformed pid_start names no process we can check: unknown, not
	// gone, so that a bad record never releases a live worker's claim.
	if r.PID <= 0 || !proc.ValidStart(r.PIDStart) || !w.Host.Owns(r.Host, r.HostID) {
		return ProcUnknown
	}
	if !rd.matches(r.PID, r.PIDStart) {
		return ProcGone
	}
	if rd.refused(r) != nil {
		// pid 1, this process or an ancestor, with the recorded start
		// time: never signalled, and its tasks are not released while
		// it runs. The pass warns.
		return ProcUnknown
	}
	return ProcRunning
}

// refused says why the process of record r must never be signalled (pid
// 1 and below, this process or an ancestor: a hand-written or mistaken
// record), or nil. The ancestry is read once for the reader's pass.
func (rd *reader) refused(r *protocol.Worker) error {
	if r.PID == 0 {
		return nil // no process recorded
	}
	return rd.guards.Guard(r.PID)
}

// Statuses classifies every worker record without acting (pg-monitor
// status). Unreadable records come back as errors.
func (w *Watcher) Statuses(ctx context.Context) ([]Status, []error) {
	rd := &reader{}
	recs, errs := w.team().Workers().List(ctx)
	st, _ := w.loadState()
	now := w.now()
	out := make([]Status, 0, len(recs))
	for _, r := range recs {
		out = append(out, w.status(r, Classify(r, now, w.probe(rd, r), w.Opts), st))
	}
	return out, errs
}

func (w *Watcher) status(r *protocol.Worker, v Verdict, st *State) Status {
	s := Status{
		Type: "worker_status", Worker: r.Worker, Liveness: string(v.Liveness), Reason: v.Reason,
		PID: r.PID, Host: r.Host, HostID: r.HostID, State: r.State, Task: r.Task, Step: r.Step,
		HeartbeatAt: r.HeartbeatAt, HeartbeatAgeS: secs(v.HeartbeatAge), ProgressAgeS: secs(v.ProgressAge),
		Usage: r.Usage, Spent: r.Spent,
	}
	if k := st.Kills[r.Worker]; k != nil && k.PID == r.PID && k.PIDStart == r.PIDStart {
		s.Stopping = true
	}
	return s
}

func secs(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }

// Result is what one pass saw and did.
type Result struct {
	Workers []Status
	Events  []protocol.MonitorEvent
	// InFlight counts kills still waiting for their process to end.
	InFlight int
	// Errors are problems that did not stop the pass (an unreadable
	// record, a failed release to retry next pass).
	Errors []error
}

// Locked runs fn while holding the team's monitor lock.
func (w *Watcher) Locked(ctx context.Context, fn func() error) error {
	if err := w.Dir.Ensure(); err != nil {
		return err
	}
	lk := flock.New(filepath.Join(w.Dir.Path(), LockFile))
	ok, err := lk.TryLockContext(ctx, 10*time.Millisecond)
	if err != nil {
		return fmt.Errorf("lock %s: %w", LockFile, err)
	}
	if !ok {
		return fmt.Errorf("lock %s: not acquired", LockFile)
	}
	defer lk.Unlock()
	return fn()
}

// Pass classifies every worker record and acts on it, once, under the
// monitor lock:
//   - stale or stuck, process running: SIGTERM to its process group;
//   - SIGTERM sent more than Grace ago, process still running: SIGKILL;
//   - process gone (dead, or ended without releasing): release its claimed
//     tasks through the queue.
//
// Signals go only to a pid whose start time still matches the record.
func (w *Watcher) Pass(ctx context.Context) (*Result, error) {
	var res *Result
	err := w.Locked(ctx, func() error {
		var err error
		res, err = w.pass(ctx)
		return err
	})
	return res, err
}

func (w *Watcher) pass(ctx context.Context) (*Result, error) {
	res := &Result{}
	st, err := w.loadState()
	if err != nil {
		return nil, err
	}
	changed := false
	rd := &reader{}
	recs, errs := w.team().Workers().List(ctx)
	res.Errors = append(res.Errors, errs...)
	now := w.now()
	if err := w.checkIntervals(rd, recs, now); err != nil {
		return res, err
	}

	// Kills in flight: drop the finished ones, escalate the overdue ones.
	ended := map[string]*Kill{}
	for _, name := range sortedKeys(st.Kills) {
		k := st.Kills[name]
		if !proc.Matches(k.PID, k.PIDStart) {
			// The leader ended. What is left of its group (a child that
			// ignores SIGTERM, a background job) gets SIGKILL after the
			// grace period, as the group would have.
			left := proc.Leftovers(k.PID, k.Members)
			if len(left) == 0 {
				ended[name] = k
				delete(st.Kills, name)
				changed = true
				continue
			}
			if !k.Marked {
				// A kill of an older version, its mark never checked: the
				// rest of the group is not signalled.
				ended[name] = k
				delete(st.Kills, name)
				changed = true
				continue
			}
			if due, again := w.killDue(k, now); due {
				why := fmt.Sprintf("%d process(es) of its group (pid %s) still running %s after SIGTERM, after the worker ended (grace %s); %s",
					len(left), pids(left), round(now.Sub(k.TermAt)), w.Opts.Grace, k.Reason)
				if _, err := w.sigkill(res, st, name, k, now, again, why, fmt.Sprintf("kill the rest of worker %s's process group %d", name, k.PID),
					func() (bool, error) { return w.signals().SignalLeftovers(k.PID, k.Members, syscall.SIGKILL) }); err != nil {
					return res, err
				}
				changed = true
			}
			continue
		}
		// Children started since the SIGTERM belong to the group too.
		if m := proc.GroupOf(k.target()); m != nil && !slices.Equal(m, k.Members) {
			k.Members = m
			changed = true
		}
		if due, again := w.killDue(k, now); due {
			if err := w.marked(name, k.PID, k.PIDStart); err != nil {
				// Its mark went away since the SIGTERM (a pg-loop
				// removes its own as it exits): no SIGKILL, and, as
				// for a process never marked, said once.
				delete(st.Kills, name)
				st.Unmarked[name] = incarnation(&protocol.Worker{PID: k.PID, PIDStart: k.PIDStart})
				changed = true
				w.emit(res, protocol.MonitorEvent{Action: ActNotSignalled, Worker: name, PID: k.PID,
					Reason: fmt.Sprintf("no SIGKILL: %v; %s", err, k.Reason)})
				continue
			}
			why := fmt.Sprintf("still running %s after SIGTERM (grace %s); %s", round(now.Sub(k.TermAt)), w.Opts.Grace, k.Reason)
			sent, err := w.sigkill(res, st, name, k, now, again, why, fmt.Sprintf("kill worker %s (pid %d)", name, k.PID),
				func() (bool, error) { return w.signals().SignalGroup(k.target(), syscall.SIGKILL) })
			if err != nil {
				return res, err
			}
			changed = true
			if sent {
				waitGone(ctx, k.PID, k.PIDStart, 200*time.Millisecond)
			}
		}
	}

	var orphaned []*protocol.Worker // process gone: release its tasks
	reasons := map[string]string{}
	for _, r := range recs {
		p := w.probe(rd, r)
		if err := rd.refused(r); err != nil && p == ProcUnknown {
			res.Errors = append(res.Errors, fmt.Errorf("worker %s: pid %d is never acted on: %w", r.Worker, r.PID, err))
		}
		v := Classify(r, now, p, w.Opts)
		switch {
		case (v.Liveness == Stale || v.Liveness == Stuck) && p == ProcRunning:
			if k := st.Kills[r.Worker]; k != nil && k.PID == r.PID && k.PIDStart == r.PIDStart {
				break // already being stopped
			}
			reason := string(v.Liveness) + ": " + v.Reason
			if err := w.marked(r.Worker, r.PID, r.PIDStart); err != nil {
				if st.Unmarked[r.Worker] != incarnation(r) {
					st.Unmarked[r.Worker] = incarnation(r)
					changed = true
					w.emit(res, protocol.MonitorEvent{Action: ActNotSignalled, Worker: r.Worker, PID: r.PID, Task: r.Task,
						Reason: fmt.Sprintf("not signalled: %v; %s; its tasks are left to their lease", err, reason)})
				}
				break
			}
			// Write ahead, as for SIGKILL: a watcher that dies after this
			// leaves a kill in flight, which the next one escalates after
			// the grace period, instead of a second SIGTERM.
			members := proc.GroupOf(target(r))
			st.Kills[r.Worker] = &Kill{PID: r.PID, PIDStart: r.PIDStart, PGID: r.PGID, SID: r.SID, TermAt: now, Reason: reason, Members: members, Marked: true}
			if err := w.saveState(st); err != nil {
				return res, err
			}
			sent, err := w.signals().SignalGroup(target(r), syscall.SIGTERM)
			if err != nil || !sent { // an error, or it ended between the probe and the signal
				if err != nil {
					res.Errors = append(res.Errors, fmt.Errorf("stop worker %s (pid %d): %w", r.Worker, r.PID, err))
				}
				delete(st.Kills, r.Worker)
				changed = true
				break
			}
			// The grace runs from the signal, not from the start of the
			// pass (a loaded machine may take long between the two), and
			// the journal dates the sigterm event the same.
			k := st.Kills[r.Worker]
			k.TermAt = time.Now().UTC()
			changed = true
			w.emit(res, protocol.MonitorEvent{TS: k.TermAt, Action: ActSigterm, Worker: r.Worker, PID: r.PID, Task: r.Task, Reason: reason})
		case p == ProcGone:
			if st.Dead[r.Worker] == incarnation(r) {
				break // its tasks were released already
			}
			orphaned = append(orphaned, r)
			reasons[r.Worker] = v.Reason
			if v.Liveness == Done {
				reasons[r.Worker] = fmt.Sprintf("ended (%s) holding a claim", v.Reason)
			}
			k := st.Kills[r.Worker] // killed in this pass
			if k == nil {
				k = ended[r.Worker]
			}
			if k != nil && k.PID == r.PID {
				reasons[r.Worker] = "stopped by the monitor (" + k.Reason + ")"
			}
		}
		res.Workers = append(res.Workers, w.status(r, v, st))
	}

	if len(orphaned) > 0 {
		released, err := w.release(ctx, res, orphaned, reasons)
		if err != nil {
			res.Errors = append(res.Errors, err)
		}
		for _, r := range released {
			st.Dead[r.Worker] = incarnation(r)
			changed = true
		}
	}

	res.InFlight = len(st.Kills)
	if changed {
		if err := w.saveState(st); err != nil {
			return res, err
		}
	}
	return res, nil
}

// marked says why the process pid (started at start) of worker name must
// not be signalled, or nil: it must carry that worker's mark in this
// monitor's data root (package workermark). A record alone, which anyone
// who can write the store may have written, never is a reason to signal.
func (w *Watcher) marked(name string, pid int, start string) error {
	return workermark.Check(w.Dir.Home, pid, start, w.Dir.Team, name, w.Host.ID)
}

// ReleaseWorker releases the claimed tasks of worker name (whose process
// is known to have ended), under the monitor lock. The run supervisor
// calls it when one of its children exits.
func (w *Watcher) ReleaseWorker(ctx context.Context, r *protocol.Worker, reason string) ([]protocol.MonitorEvent, error) {
	res := &Result{}
	err := w.Locked(ctx, func() error {
		st, err := w.loadState()
		if err != nil {
			return err
		}
		released, err := w.release(ctx, res, []*protocol.Worker{r}, map[string]string{r.Worker: reason})
		if len(released) > 0 && r.PID > 0 {
			st.Dead[r.Worker] = incarnation(r)
			if k := st.Kills[r.Worker]; k != nil && k.PID == r.PID {
				delete(st.Kills, r.Worker)
			}
			if serr := w.saveState(st); serr != nil && err == nil {
				err = serr
			}
		}
		return err
	})
	return res.Events, err
}

// release gives back every claimed task of the given workers. It returns
// the workers whose tasks are all released (or had none).
func (w *Watcher) release(ctx context.Context, res *Result, workers []*protocol.Worker, reasons map[string]string) ([]*protocol.Worker, error) {
	if w.Queue == nil {
		return nil, errors.New("no queue to release tasks to")
	}
	tasks, err := w.Queue.Claimed(ctx)
	if err != nil {
		return nil, fmt.Errorf("list claimed tasks: %w", err)
	}
	byWorker := map[string][]protocol.Task{}
	for _, t := range tasks {
		byWorker[t.Claim.Worker] = append(byWorker[t.Claim.Worker], t)
	}
	var done []*protocol.Worker
	var firstErr error
	for _, r := range workers {
		ok := true
		for _, t := range byWorker[r.Worker] {
			rel, err := w.Queue.Release(ctx, t.ID, t.Claim.Token)
			if err != nil {
				ok = false
				if firstErr == nil {
					firstErr = fmt.Errorf("release task %s of worker %s: %w", t.ID, r.Worker, err)
				}
				continue
			}
			if rel {
				w.emit(res, protocol.MonitorEvent{Action: ActRelease, Worker: r.Worker, PID: r.PID, Task: t.ID,
					Reason: fmt.Sprintf("worker %s %s", r.Worker, reasons[r.Worker])})
			}
		}
		if ok {
			done = append(done, r)
		}
	}
	return done, firstErr
}

// emit appends the event to the team journal and to the result.
func (w *Watcher) emit(res *Result, ev protocol.MonitorEvent) {
	ev.Type = protocol.JournalMonitor
	if ev.TS.IsZero() {
		ev.TS = time.Now().UTC()
	}
	if err := w.team().Journal().Append(context.Background(), ev); err != nil {
		res.Errors = append(res.Errors, err)
	}
	res.Events = append(res.Events, ev)
}

// Emit appends a monitor event to the team journal.
func (w *Watcher) Emit(ev protocol.MonitorEvent) error {
	res := &Result{}
	w.emit(res, ev)
	return errors.Join(res.Errors...)
}

func incarnation(r *protocol.Worker) string { return strconv.Itoa(r.PID) + "/" + r.PIDStart }

func (w *Watcher) statePath() string { return filepath.Join(w.Dir.Path(), StateFile) }

func (w *Watcher) loadState() (*State, error) {
	st := &State{}
	b, err := atomicfile.ReadFile(w.statePath(), 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", StateFile, err)
	}
	if err == nil && len(b) > 0 {
		if err := json.Unmarshal(b, st); err != nil {
			return nil, fmt.Errorf("read %s: %w", StateFile, err)
		}
	}
	if st.Kills == nil {
		st.Kills = map[string]*Kill{}
	}
	if st.Dead == nil {
		st.Dead = map[string]string{}
	}
	if st.Unmarked == nil {
		st.Unmarked = map[string]string{}
	}
	return st, nil
}

func (w *Watcher) saveState(st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(w.statePath(), append(b, '\n'), teamdir.FileMode)
}

// waitGone polls until pid has ended or max elapsed.
func waitGone(ctx context.Context, pid int, start string, max time.Duration) bool {
	deadline := time.Now().Add(max)
	for proc.Matches(pid, start) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func pids(ms []proc.Member) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(m.PID))
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func appendJournal(w *Watcher, recs ...any) error {
	return w.team().Journal().Append(context.Background(), recs...)
}
