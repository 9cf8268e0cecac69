package monitor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/workermark"
)

// BeatOptions are the fields a heartbeat sets; nil pointers keep the
// record's value.
type BeatOptions struct {
	Worker string
	PID    int // the worker's process: its pid and start time go in the record
	// Home is the data root where the worker mark of PID is made
	// (package workermark): a watcher of this data root signals PID only
	// with it.
	Home     string
	Host     proc.Host // where PID lives: the record's host and host_id
	State    *string
	Task     *string
	Step     *int
	CostUSD  *float64       // this process's spending (usage.cost_usd)
	Every    *time.Duration // how often the worker beats (heartbeat_interval_ms)
	Progress bool           // mark progress even without a state or task change
	Now      time.Time
}

// ErrInvalid marks a heartbeat refused for what it would record: nothing
// was written.
var ErrInvalid = errors.New("invalid heartbeat")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
}

// validate checks everything the heartbeat would record, before anything
// is written, and returns the start time of its pid. The pid must be a
// live process that can be a worker (see proc.CheckWorker): the monitor
// signals it when its heartbeat goes stale.
func (o *BeatOptions) validate() (proc.Stat, error) {
	if err := teamdir.ValidName("worker", o.Worker); err != nil {
		return proc.Stat{}, invalid("%v", err)
	}
	if err := proc.CheckWorker(o.PID); err != nil {
		if errors.Is(err, proc.ErrGone) {
			return proc.Stat{}, invalid("--pid %d: no such process", o.PID)
		}
		return proc.Stat{}, invalid("--pid: %v", err)
	}
	// A mark makes the watchers of this data root signal the process: it
	// must be one this user could signal itself, never another user's
	// (a root beat naming a process of someone else included).
	uid, err := proc.UID(o.PID)
	if err != nil {
		return proc.Stat{}, invalid("--pid %d: %v", o.PID, err)
	}
	if uid != os.Getuid() {
		return proc.Stat{}, invalid("--pid %d runs as uid %d, not as this user (uid %d): a worker must be a process of the user who beats for it", o.PID, uid, os.Getuid())
	}
	st, err := proc.ReadStat(o.PID)
	if err != nil {
		return st, invalid("--pid %d: %v", o.PID, err)
	}
	if o.Step != nil && *o.Step < 0 {
		return proc.Stat{}, invalid("--step must be 0 or more, got %d", *o.Step)
	}
	if o.CostUSD != nil && !(*o.CostUSD >= 0 && !math.IsInf(*o.CostUSD, 1)) { // false for NaN too
		return proc.Stat{}, invalid("--cost-usd must be a finite number of 0 or more, got %v", *o.CostUSD)
	}
	if o.Every != nil && *o.Every <= 0 {
		return proc.Stat{}, invalid("--every must be a positive duration, got %s", *o.Every)
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"state", o.State}, {"task", o.Task}} {
		if f.v == nil {
			continue
		}
		if f.name == "state" && *f.v == "" {
			return proc.Stat{}, invalid("--state must not be empty")
		}
		if len(*f.v) > 256 || strings.ContainsFunc(*f.v, unicode.IsControl) || !utf8.ValidString(*f.v) {
			return proc.Stat{}, invalid("--%s must be printable text of at most 256 bytes, got %q", f.name, *f.v)
		}
	}
	if !o.Now.IsZero() && Future(time.Now(), o.Now) {
		return proc.Stat{}, invalid("heartbeat time %s is in the future", o.Now.UTC().Format(time.RFC3339))
	}
	return st, nil
}

// Beat creates or updates the worker's record with a fresh heartbeat, the
// way pg-loop does, for workers written as shell scripts. A new process
// (pid or start time differ) starts a new epoch. A change of state or task,
// or Progress, also moves progress_at. State changes are journaled.
func Beat(ctx context.Context, t store.Team, o BeatOptions) (*protocol.Worker, error) {
	st, err := o.validate()
	if err != nil {
		return nil, err
	}
	start := st.Start
	if o.Home == "" {
		return nil, errors.New("beat: no data root for the worker mark")
	}
	if err := workermark.Make(o.Home, o.PID, start, workermark.Mark{Team: t.Name(), Worker: o.Worker, HostID: o.Host.ID}); err != nil {
		return nil, err
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	now = now.UTC()
	// A worker may beat from a background loop while its main loop records
	// state changes: the read-modify-write is serialized per worker (an
	// unreadable record comes as none and is replaced: the heartbeat must
	// go through).
	var events []any
	rec, err := t.Workers().Update(ctx, o.Worker, func(rec *protocol.Worker) (*protocol.Worker, error) {
		events = nil
		if rec == nil || rec.PID != o.PID || rec.PIDStart != start {
			epoch := 1
			if rec != nil {
				epoch = rec.Epoch + 1
			}
			var spent *protocol.Usage
			if rec != nil {
				spent = rec.Carried() // the earlier processes' spending stays counted
			}
			rec = &protocol.Worker{Worker: o.Worker, PID: o.PID, PIDStart: start, Epoch: epoch,
				State: "running", StartedAt: now, ProgressAt: now, Velocity: 1, Spent: spent}
			events = append(events, protocol.WorkerEvent{Type: protocol.JournalWorker, TS: now, Worker: o.Worker, Op: "start", PID: o.PID, State: rec.State})
		}
		rec.Host, rec.HostID = o.Host.Name, o.Host.ID
		// The watcher signals the pid only while its group and session are
		// still these.
		rec.PGID, rec.SID = st.PGID, st.SID
		rec.HeartbeatAt = now
		progress := o.Progress
		if o.State != nil && *o.State != rec.State {
			events = append(events, protocol.WorkerEvent{Type: protocol.JournalWorker, TS: now, Worker: o.Worker, Op: "state", PID: o.PID, State: *o.State, Task: rec.Task})
			rec.State = *o.State
			progress = true
		}
		if o.Task != nil && *o.Task != rec.Task {
			rec.Task = *o.Task
			progress = true
		}
		if o.Step != nil && *o.Step != rec.Step {
			rec.Step = *o.Step
			progress = true
		}
		if o.CostUSD != nil {
			rec.Usage.CostUSD = *o.CostUSD
		}
		if o.Every != nil {
			rec.HeartbeatIntervalMS = o.Every.Milliseconds()
		}
		if progress {
			rec.ProgressAt = now
		}
		return rec, nil
	})
	if err != nil {
		return nil, err
	}
	if len(events) > 0 {
		if err := t.Journal().Append(ctx, events...); err != nil {
			return rec, err
		}
	}
	return rec, nil
}
