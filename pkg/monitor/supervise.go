package monitor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/ledger"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/workermark"
)

// The lines a worker prints last (DESIGN.md §4, pg-loop).
const (
	MarkerDone  = "<POWERGLIDE_DONE>"
	MarkerError = "<POWERGLIDE_ERROR>"
)

// Restart policies.
const (
	// RestartOnFailure restarts a worker that exits without
	// <POWERGLIDE_DONE> (a crash, a signal, <POWERGLIDE_ERROR>), unless
	// its exit says a restart cannot help: see Permanent.
	RestartOnFailure = "on-failure"
	// RestartAlways also restarts after <POWERGLIDE_DONE> and after the
	// exits Permanent names, while the queue has work.
	RestartAlways = "always"
	RestartNever  = "never"
)

// RunOptions configure a supervised swarm.
type RunOptions struct {
	Workers int
	// Prefix starts every worker's name: Prefix1..PrefixN. Hosts that
	// share a team on one store each take their own, so that no two
	// workers of the team have the same name.
	Prefix      string
	Restart     string
	MaxRestarts int           // restarts per worker; negative: unlimited
	Backoff     time.Duration // first restart delay, doubled each time, capped at MaxBackoff
	MaxBackoff  time.Duration
	Interval    time.Duration // watch pass and budget check period
	BudgetUSD   float64       // 0: no team budget
	Argv        []string      // the worker command
	Env         []string      // its environment (POWERGLIDE_TEAM and POWERGLIDE_WORKER are added)
	Log         io.Writer     // human progress lines (stderr)
}

// Outcome is how a supervised run ended.
type Outcome int

const (
	OutcomeDone        Outcome = iota // queue drained, workers ended
	OutcomeBudget                     // the team budget stopped the workers
	OutcomeUndrained                  // every worker ended (or gave up) with work left
	OutcomeInterrupted                // the context was cancelled; workers were stopped
)

// RunResult reports a supervised run.
type RunResult struct {
	Outcome  Outcome
	Stats    Stats
	CostUSD  float64
	Restarts int
	// Failed and Done count the tasks the run ended: on a drained queue
	// those that its workers claimed and that then failed, or were done
	// (from the journal); otherwise the queue's counts at the end less
	// those at the start.
	Failed, Done int
	// GaveUp says why each worker that was given up on (an exit a restart
	// cannot heal, or its restarts used up) was.
	GaveUp []string
}

// Succeeded reports whether a drained run is a success: no task of the
// run failed and no worker was given up. The rule pg-loop follows for its
// own tasks, and swarm.sh through pg-monitor's exit status.
func (r *RunResult) Succeeded() bool { return r.Failed == 0 && len(r.GaveUp) == 0 }

// Supervisor spawns and keeps a swarm of workers.
type Supervisor struct {
	W    *Watcher
	Opts RunOptions

	exits chan exitMsg
	slots []*slot
	// started is when the run began: a budget refusal after it is this
	// run's.
	started time.Time
}

type slot struct {
	name      string
	pid       int
	start     string
	child     *proc.Child // the running process; its group is signalled only until it is reaped
	running   bool
	restarts  int
	retired   bool
	restartAt time.Time
}

type exitMsg struct {
	s       *slot
	pid     int
	start   string
	err     error
	marker  string
	lastErr string // the last line the process wrote to stderr
}

func (s *Supervisor) logf(format string, args ...any) {
	if s.Opts.Log != nil {
		fmt.Fprintf(s.Opts.Log, "pg-monitor: "+format+"\n", args...)
	}
}

// Run spawns the workers and supervises them until the queue is drained
// and they have ended, the budget is reached, every worker gave up, or ctx
// is cancelled (then the workers are stopped: SIGTERM, grace, SIGKILL, and
// their tasks released).
func (s *Supervisor) Run(ctx context.Context) (*RunResult, error) {
	o := &s.Opts
	if o.Workers < 1 {
		return nil, errors.New("need at least one worker")
	}
	if len(o.Argv) == 0 {
		return nil, errors.New("no worker command")
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if err := s.W.Dir.Ensure(); err != nil {
		return nil, err
	}
	// Fail before spawning anything when the queue cannot be reached.
	before, err := s.W.Queue.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	s.exits = make(chan exitMsg, o.Workers)
	res := &RunResult{}
	ta, err := startTally(ctx, s.W.team())
	if err != nil {
		return nil, err
	}
	defer ta.close()
	if err := s.writeBudget(ctx); err != nil {
		return nil, err
	}
	s.started = time.Now()
	// The budget counts earlier runs: a team that spent it starts nothing,
	// unless there is nothing left to do.
	if c := s.teamCost(ctx); o.BudgetUSD > 0 && c >= o.BudgetUSD && !s.drained(ctx) {
		reason := fmt.Sprintf("team cost $%.4f already reached the budget $%.4f: no worker started", c, o.BudgetUSD)
		s.logf("%s", reason)
		_ = s.W.Emit(protocol.MonitorEvent{Action: ActBudgetStop, Reason: reason})
		res.Outcome, res.CostUSD = OutcomeBudget, c
		return res, nil
	}
	for i := 1; i <= o.Workers; i++ {
		sl := &slot{name: o.Prefix + strconv.Itoa(i)}
		ta.names[sl.name] = true
		s.slots = append(s.slots, sl)
		if err := s.spawn(ctx, sl, ActSpawn, "start of run"); err != nil {
			s.stopAll(context.WithoutCancel(ctx), "a worker could not be started")
			return nil, err
		}
	}
	ta.start(ctx)
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	for {
		select {
		case <-s.nextRestart():
			s.restartDue(ctx)
		case <-ctx.Done():
			s.stopAll(context.WithoutCancel(ctx), "monitor interrupted: "+context.Cause(ctx).Error())
			res.Outcome = OutcomeInterrupted
			res.CostUSD = s.teamCost(ctx)
			return res, context.Cause(ctx)
		case m := <-s.exits:
			s.exited(ctx, m, res, true)
		case <-tick.C:
			if pr, err := s.W.Pass(ctx); err != nil {
				var ie *IntervalError
				if errors.As(err, &ie) {
					s.logf("%v: stopping every worker", err)
					s.stopAll(context.WithoutCancel(ctx), "the stale limit is too short for the workers' beat")
					return nil, err
				}
				if ctx.Err() == nil {
					s.logf("watch pass: %v", err)
				}
			} else {
				for _, e := range pr.Errors {
					s.logf("watch pass: %v", e)
				}
			}
			s.restartDue(ctx)
		}
		// The budget counts ended processes too, so it is checked after
		// an exit as well as on each tick. A team whose work is done is
		// not stopped: its workers are ending on their own.
		if o.BudgetUSD > 0 {
			if c := s.teamCost(ctx); s.overBudget(ctx, c) && !s.drained(ctx) {
				reason := fmt.Sprintf("team cost $%.4f reached the budget $%.4f", c, o.BudgetUSD)
				s.logf("%s: stopping every worker", reason)
				_ = s.W.Emit(protocol.MonitorEvent{Action: ActBudgetStop, Reason: reason})
				s.stopAll(context.WithoutCancel(ctx), "team budget reached")
				res.Outcome = OutcomeBudget
				res.CostUSD = c
				return res, nil
			}
		}
		if s.active() {
			continue
		}
		// Every worker ended and none is due a restart.
		st, err := s.W.Queue.Stats(ctx)
		if err != nil {
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		res.Stats = st
		res.CostUSD = s.teamCost(ctx)
		res.Failed, res.Done = max(st.Failed-before.Failed, 0), max(st.Done-before.Done, 0)
		if st.Drained() {
			reason := fmt.Sprintf("queue drained (%d done, %d failed, %d cancelled) and every worker ended", st.Done, st.Failed, st.Cancelled)
			if st.Stuck > 0 {
				reason += fmt.Sprintf("; %d pending task(s) can never run: a dependency failed or was cancelled", st.Stuck)
				s.logf("%d pending task(s) can never run: a dependency failed or was cancelled", st.Stuck)
			}
			end := protocol.MonitorEvent{TS: time.Now().UTC(), Action: ActDone, Reason: reason}
			if err := s.W.Emit(end); err != nil {
				s.logf("journal: %v; the run's tasks are counted from the queue's totals", err)
			} else if done, failed, err := ta.count(ctx, end); err != nil {
				s.logf("%v; the run's tasks are counted from the queue's totals", err)
			} else {
				res.Done, res.Failed = done, failed
			}
			res.Outcome = OutcomeDone
			return res, nil
		}
		if refused := s.budgetRefused(ctx); refused != "" {
			// The workers stopped themselves before a call the team's
			// budget could not pay.
			s.logf("team budget: %s", refused)
			_ = s.W.Emit(protocol.MonitorEvent{Action: ActBudgetStop, Reason: "a worker stopped at the team budget: " + refused})
			res.Outcome = OutcomeBudget
			return res, nil
		}
		res.Outcome = OutcomeUndrained
		return res, nil
	}
}

// nextRestart fires when the earliest pending restart is due (never when
// none is pending).
func (s *Supervisor) nextRestart() <-chan time.Time {
	var next time.Time
	for _, sl := range s.slots {
		if !sl.running && !sl.retired && !sl.restartAt.IsZero() && (next.IsZero() || sl.restartAt.Before(next)) {
			next = sl.restartAt
		}
	}
	if next.IsZero() {
		return nil
	}
	return time.After(time.Until(next))
}

// restartDue restarts the workers whose backoff is over.
func (s *Supervisor) restartDue(ctx context.Context) {
	o := &s.Opts
	now := time.Now()
	for _, sl := range s.slots {
		if !sl.running && !sl.retired && !sl.restartAt.IsZero() && !now.Before(sl.restartAt) {
			sl.restartAt = time.Time{}
			reason := fmt.Sprintf("restart %d", sl.restarts)
			if o.MaxRestarts >= 0 {
				reason += fmt.Sprintf(" of at most %d", o.MaxRestarts)
			}
			if err := s.spawn(ctx, sl, ActRestart, reason); err != nil {
				s.logf("worker %s: %v", sl.name, err)
				sl.retired = true
			}
		}
	}
}

func (s *Supervisor) active() bool {
	for _, sl := range s.slots {
		if sl.running || (!sl.retired && !sl.restartAt.IsZero()) {
			return true
		}
	}
	return false
}

// teamCost is what the team has spent, as pg-dash shows it: every worker
// record's spent (its earlier processes, carried over by each restart)
// plus usage (its current or last process). It is read from the records,
// so it survives restarts of the workers and of pg-monitor itself.
func (s *Supervisor) teamCost(ctx context.Context) float64 {
	recs, _ := s.W.team().Workers().List(ctx)
	var c float64
	for _, r := range recs {
		c += r.Total().CostUSD
	}
	if tb, err := ledger.Read(ctx, s.W.team()); err == nil {
		c = max(c, tb.SpentUSD) // the ledger outlives removed records
	}
	return c
}

// spawn starts one worker in its own process group. It runs under the
// monitor lock and seeds worker-<n>.json with the new pid and start time
// before releasing it, so no watcher can mistake the new process's claims
// for those of the dead one it replaces.
func (s *Supervisor) spawn(ctx context.Context, sl *slot, action, reason string) error {
	d := s.W.Dir
	err := s.W.Locked(ctx, func() error {
		logf, err := atomicfile.OpenAppend(d.Log(sl.name), teamdir.FileMode)
		if err != nil {
			return fmt.Errorf("open worker log: %w", err)
		}
		errf, err := atomicfile.OpenAppend(d.Log(sl.name)+".stderr", teamdir.FileMode)
		if err != nil {
			logf.Close()
			return fmt.Errorf("open worker stderr log: %w", err)
		}
		// Where this process's stderr begins: its last line may say why
		// it failed (see Permanent).
		var errOff int64
		if fi, err := errf.Stat(); err == nil {
			errOff = fi.Size()
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			logf.Close()
			errf.Close()
			return err
		}
		// The worker's stderr goes through a pipe too, to be redacted on
		// its way to the file.
		epr, epw, err := os.Pipe()
		if err != nil {
			pr.Close()
			pw.Close()
			logf.Close()
			errf.Close()
			return err
		}
		cmd := proc.Command(exec.Command(s.Opts.Argv[0], s.Opts.Argv[1:]...))
		cmd.Env = append(append([]string{}, s.Opts.Env...), "POWERGLIDE_TEAM="+d.Team, "POWERGLIDE_WORKER="+sl.name)
		cmd.Stdout = pw
		cmd.Stderr = epw
		// Leftovers of the worker's process group (a backgrounded child)
		// would keep its stdout open and run unsupervised: Wait ends them
		// while the worker is still unreaped, so its group id cannot name
		// another group.
		cmd.EndGroup = true
		err = cmd.Start()
		pw.Close()
		epw.Close()
		errDone := copyRedacted(errf, epr)
		if err != nil {
			pr.Close()
			logf.Close()
			<-errDone
			return fmt.Errorf("start worker %s: %w", sl.name, err)
		}
		pid := cmd.Process.Pid
		st, _ := proc.ReadStat(pid)
		start := st.Start
		sl.pid, sl.start, sl.child, sl.running = pid, start, cmd, true
		// This process started it: it is the team's worker, and the
		// watchers may stop it (a worker that hangs before its first
		// beat included). The mark goes when it is reaped (follow).
		if err := workermark.Make(d.Home, pid, start, workermark.Mark{Team: d.Team, Worker: sl.name, HostID: s.W.Host.ID}); err != nil {
			s.logf("worker %s: %v", sl.name, err)
		}
		now := time.Now().UTC()
		// The new process may beat before its seed is written: both
		// read-modify-writes are serialized per worker by the store, and a
		// record that already names the new pid is its own and is kept.
		_, err = s.W.team().Workers().Update(ctx, sl.name, func(old *protocol.Worker) (*protocol.Worker, error) {
			if old != nil && old.PID == pid {
				return nil, nil
			}
			rec := &protocol.Worker{Worker: sl.name, PID: pid, PIDStart: start, PGID: st.PGID, SID: st.SID, Host: s.W.Host.Name, HostID: s.W.Host.ID, Epoch: 1,
				State: "starting", HeartbeatAt: now, ProgressAt: now, StartedAt: now, Velocity: 1}
			if old != nil {
				rec.Epoch = old.Epoch + 1
				// What the earlier processes spent stays in the team's
				// total; pg-loop and beat keep it when they take the
				// record over.
				rec.Spent = old.Carried()
			}
			return rec, nil
		})
		if err != nil {
			s.logf("worker %s: seed record: %v", sl.name, err)
		}
		go s.follow(sl, cmd, pr, logf, pid, start, d.Log(sl.name)+".stderr", errOff, errDone)
		return nil
	})
	if err != nil {
		return err
	}
	s.logf("worker %s: %s pid %d (%s)", sl.name, action, sl.pid, reason)
	return s.W.Emit(protocol.MonitorEvent{Action: action, Worker: sl.name, PID: sl.pid, Reason: reason})
}

// follow copies the worker's stdout to its log, line by line, watching for
// the end markers, then reaps the worker and reports its exit.
func (s *Supervisor) follow(sl *slot, cmd *proc.Child, pr *os.File, logf *os.File, pid int, start string, errPath string, errOff int64, errDone <-chan struct{}) {
	var mu sync.Mutex
	marker := ""
	eof := make(chan struct{})
	go func() {
		defer close(eof)
		defer logf.Close()
		br := bufio.NewReaderSize(pr, 64*1024)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				if line[len(line)-1] != '\n' {
					line = append(line, '\n')
				}
				// pg-loop redacts its events itself; a worker of another
				// kind (a script) may not.
				_, _ = logf.Write(secrets.Redact(line))
				// Only a line that is the marker counts: an event quoting
				// it (a tool's output, the model's text) is not one.
				t := bytes.TrimSpace(line)
				mu.Lock()
				switch {
				case string(t) == MarkerDone:
					marker = MarkerDone
				case string(t) == MarkerError:
					marker = MarkerError
				case len(t) > 0:
					marker = "" // the marker must be the last line
				}
				mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	err := cmd.Wait()
	// Reaped: its pid may name another process from now on.
	if rerr := workermark.Remove(s.W.Dir.Home, pid, start); rerr != nil {
		s.logf("worker %s: %v", sl.name, rerr)
	}
	select {
	case <-eof:
	case <-time.After(2 * time.Second):
	}
	pr.Close()
	<-eof
	// The stderr copy ends with the worker, unless something it left
	// holds the pipe: its last line is read after a short wait at most.
	select {
	case <-errDone:
	case <-time.After(2 * time.Second):
	}
	mu.Lock()
	m := marker
	mu.Unlock()
	s.exits <- exitMsg{s: sl, pid: pid, start: start, err: err, marker: m, lastErr: lastLine(errPath, errOff)}
}

// copyRedacted copies a worker's stderr to its file, secrets redacted, and
// closes both at the end of the stream; the channel closes then.
func copyRedacted(f *os.File, r *os.File) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		defer r.Close()
		w := secrets.Default().NewWriter(f)
		_, _ = io.Copy(w, r)
		_ = w.Flush()
	}()
	return done
}

// lastLine is the last non-empty line of the file at path after offset
// off, from its last 4 KiB.
func lastLine(path string, off int64) string {
	f, err := atomicfile.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= off {
		return ""
	}
	off = max(off, fi.Size()-4096)
	b := make([]byte, fi.Size()-off)
	n, _ := f.ReadAt(b, off)
	lines := strings.Split(strings.TrimSpace(string(b[:n])), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Permanent says why a worker's exit is one a restart cannot heal, or "":
//   - exit status 2: a usage error or bad input (DESIGN.md §2); the same
//     command fails the same way;
//   - exit status 4: a limit of the worker stopped it (pg-loop's budget);
//     a new process would start the limit afresh;
//   - the last line of its stderr says "unrecoverable" (pg-loop's
//     "error: unrecoverable: ..." when the provider rejects its
//     credentials or does not have its model).
//
// Crashes, signals and other failures (<POWERGLIDE_ERROR> after a model
// or queue error, say) may heal, and are restarted with backoff.
func Permanent(err error, lastErr string) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Exited() {
			switch ws.ExitStatus() {
			case 2:
				return "exit status 2 is a usage error or bad input: a restart would fail the same way"
			case 4:
				return "exit status 4 means a limit of the worker stopped it: a restart would start the limit afresh"
			}
		}
	}
	if strings.Contains(strings.ToLower(lastErr), "unrecoverable") {
		return "its last error is unrecoverable: " + lastErr
	}
	return ""
}

func describeExit(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
		}
		return ee.Error()
	}
	return err.Error()
}

// exited handles the end of one worker process: journal it, release its
// tasks, and schedule a restart when the policy asks for one.
func (s *Supervisor) exited(ctx context.Context, m exitMsg, res *RunResult, mayRestart bool) {
	sl := m.s
	sl.running = false
	how := describeExit(m.err)
	if m.marker != "" {
		how += ", last line " + m.marker
	} else {
		how += ", without " + MarkerDone
	}
	ev := protocol.WorkerEvent{Type: protocol.JournalWorker, TS: time.Now().UTC(), Worker: sl.name, Op: "exit", PID: m.pid, Reason: how}
	// The journal keeps what the process spent, whatever becomes of its
	// record.
	if r, err := s.W.team().Workers().Read(ctx, sl.name); err == nil && r.PID == m.pid && r.PIDStart == m.start && r.Usage != (protocol.Usage{}) {
		u := r.Usage
		ev.Usage = &u
	}
	_ = appendJournal(s.W, ev)
	rec := &protocol.Worker{Worker: sl.name, PID: m.pid, PIDStart: m.start}
	if _, err := s.W.ReleaseWorker(context.WithoutCancel(ctx), rec, "exited ("+how+")"); err != nil {
		s.logf("worker %s: release tasks: %v", sl.name, err)
	}
	if !mayRestart {
		s.logf("worker %s: %s", sl.name, how)
		return
	}
	o := &s.Opts
	restart := false
	permanent := ""
	switch {
	case o.Restart == RestartNever:
	case o.Restart == RestartAlways:
		restart = true
	case m.marker == MarkerDone:
	default:
		permanent = Permanent(m.err, m.lastErr)
		restart = permanent == ""
	}
	if restart {
		// A restart is pointless when nothing is left to do.
		if st, err := s.W.Queue.Stats(ctx); err == nil && st.Drained() {
			restart = false
		}
	}
	if restart && o.MaxRestarts >= 0 && sl.restarts >= o.MaxRestarts {
		reason := fmt.Sprintf("worker %s %s; it was restarted %d times, the limit (--max-restarts %d)", sl.name, how, sl.restarts, o.MaxRestarts)
		s.logf("%s: giving up on it", reason)
		_ = s.W.Emit(protocol.MonitorEvent{Action: ActGiveUp, Worker: sl.name, PID: m.pid, Reason: reason})
		res.GaveUp = append(res.GaveUp, reason)
		sl.retired = true
		return
	}
	if !restart {
		if permanent != "" {
			reason := fmt.Sprintf("worker %s %s; not restarted: %s", sl.name, how, permanent)
			s.logf("%s", reason)
			_ = s.W.Emit(protocol.MonitorEvent{Action: ActGiveUp, Worker: sl.name, PID: m.pid, Reason: reason})
			res.GaveUp = append(res.GaveUp, reason)
		} else {
			s.logf("worker %s: %s; not restarted (policy %s)", sl.name, how, o.Restart)
		}
		sl.retired = true
		return
	}
	sl.restarts++
	res.Restarts++
	delay := o.Backoff
	for i := 1; i < sl.restarts && delay < o.MaxBackoff; i++ {
		delay *= 2
	}
	delay = min(delay, o.MaxBackoff)
	sl.restartAt = time.Now().Add(delay)
	s.logf("worker %s: %s; restart %d in %s", sl.name, how, sl.restarts, delay)
}

// stopAll stops every running worker: SIGTERM to its process group, then
// SIGKILL after the grace period; each one's tasks are released as it ends.
func (s *Supervisor) stopAll(ctx context.Context, reason string) {
	running := 0
	for _, sl := range s.slots {
		sl.restartAt = time.Time{}
		sl.retired = true
		if !sl.running {
			continue
		}
		running++
		if sent, _ := sl.child.SignalGroup(syscall.SIGTERM); sent {
			_ = s.W.Emit(protocol.MonitorEvent{Action: ActSigterm, Worker: sl.name, PID: sl.pid, Reason: reason})
		}
	}
	grace := time.After(s.W.Opts.Grace)
	killed := false
	for running > 0 {
		select {
		case m := <-s.exits:
			running--
			s.exited(ctx, m, &RunResult{}, false)
		case <-grace:
			if killed {
				s.logf("%d worker(s) still running 10s after SIGKILL: giving up waiting", running)
				return
			}
			killed = true
			grace = time.After(10 * time.Second)
			for _, sl := range s.slots {
				if !sl.running {
					continue
				}
				if sent, _ := sl.child.SignalGroup(syscall.SIGKILL); sent {
					_ = s.W.Emit(protocol.MonitorEvent{Action: ActSigkill, Worker: sl.name, PID: sl.pid,
						Reason: fmt.Sprintf("still running %s after SIGTERM (%s)", s.W.Opts.Grace, reason)})
				}
			}
		}
	}
}
