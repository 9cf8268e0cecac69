package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/guard"
	"github.com/powerglide/powerglide/pkg/internal/lazyre"
	"github.com/powerglide/powerglide/pkg/ledger"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/termtext"
	"github.com/powerglide/powerglide/pkg/workermark"
)

// DefaultSystem is the system prompt of a run without --system.
const DefaultSystem = `You are a coding agent working in a repository, one task at a time, with tools to read, search, edit and run things.
Work in small steps and check your work by running it. Do not ask questions: decide and act.
When the task is complete, answer without calling any tool: give a short summary of what you changed, its first line fit for a commit subject.`

// Options configure a run. The zero value of a limit disables it.
type Options struct {
	Workdir string
	System  string
	// Guard is the exfiltration guard (nil: off).
	Guard     *guard.Guard
	Model     string
	MaxTokens int
	// ModelInfo is the model's row of pg-llm's table, when known (logged
	// at load_tasks; Budget.Prices and ContextWindow come from it).
	ModelInfo *ModelInfo
	// Lookup, when set, finds ModelInfo while the run starts (see
	// ModelLookup).
	Lookup *ModelLookup

	LLM    LLM
	Tools  Tools
	Source Source

	Verify        string
	VerifyTimeout time.Duration
	// Verifier runs the verify commands (the zero value: unconfined, with
	// this process's environment).
	Verifier  Verifier
	MaxVerify int
	// MaxVerifySet says MaxVerify was asked for. Without it the verify cap
	// is a default that yields to an iteration cap: a task with one
	// (MaxIterations, a stage's max_iterations) runs its iterations.
	MaxVerifySet bool
	// Commit commits each task's work to Repo, opened before the model
	// runs (OpenRepo).
	Commit bool
	Repo   *Repo

	Fresh         bool
	Promise       string
	MaxIterations int

	MaxSteps        int
	BreakerSame     int
	BreakerFailures int
	BreakerOutput   int // the same output of a tool this many times in a row
	BreakerCycle    int // a cycle of 2 to 4 calls repeated this many times
	Budget          Budget
	Velocity        float64 // steps per second; 0 with VelocitySet pauses
	VelocitySet     bool
	VelocityFile    string

	ContextWindow int // tokens; 0 disables windowing
	Reserve       int // tokens kept free besides max_tokens
	KeepMessages  int // recent messages summarization keeps
	// ContextSoft and ContextHard are the thresholds, as shares of the
	// usable window, past which old tool outputs are pruned and older
	// turns summarized (0: the defaults).
	ContextSoft float64
	ContextHard float64
	// ToolOutputMax is the most tokens one tool output keeps in the
	// conversation (0: a quarter of the usable window); OutputDir is where
	// longer ones are saved whole (default: outputs/ in the session).
	ToolOutputMax int
	OutputDir     string
	// NoContextFiles leaves out AGENTS.md and CLAUDE.md.
	NoContextFiles bool
	// NoSkills leaves the Agent Skills out of the system prompt; SkillsCap
	// caps their share of it (0: skills.PromptCap). Getenv reads HOME and
	// XDG_CONFIG_HOME for the user's skills (nil: the process's).
	NoSkills  bool
	SkillsCap int
	Getenv    func(string) string

	// Ask are the --ask patterns: a matching tool call waits for the
	// Approver (pg-loop serve), or in team mode for an answer through the
	// worker record; any other run denies it. Control is pg-loop serve's
	// handle on the run (steer messages).
	Ask      []AskPattern
	Approver Approver
	Control  *Control

	// Team is the team's store in team mode: the worker record is kept
	// there, and answers to --ask approvals arrive there.
	Team   store.Team
	Worker string
	// Home is the data root where the worker marks its process as the
	// team's worker (package workermark) for as long as it runs: the
	// watchers of that data root stop a stale worker only with it. ""
	// makes no mark (no watcher will signal the worker).
	Home      string
	Heartbeat time.Duration
	// ModelRetryWait is the pause before a step's model call that failed
	// in a passing way is made again (twice, the second after 3x the
	// pause); 0: the task fails at once.
	ModelRetryWait time.Duration
	Lease          time.Duration // renew the claim every Lease/10, at a heartbeat
	// IdleWait bounds the wait for a claimable task while the queue is not
	// drained (tasks blocked, or claimed by other workers); 0: no bound.
	IdleWait time.Duration

	Session *Session
	Resume  *Replay // what a resumed session had in progress
	// Ledger is the team's budget ledger (team mode): each model call
	// reserves its estimate there first and settles its cost after.
	Ledger *ledger.Ledger

	Events *Emitter
	Stderr io.Writer
	Now    func() time.Time
}

// Result is how a run ended.
type Result struct {
	State     State
	TasksDone int
	Failed    int   // tasks that failed
	Limit     bool  // some limit stopped a task or the run
	Err       error // the cause when State is Failed
	Signal    bool  // the run was interrupted
	// Idle: the run stopped waiting for a claimable task (Options.IdleWait)
	// with tasks left in the queue; it ended without <POWERGLIDE_DONE>.
	Idle     bool
	IdleLeft string // what was left, for the message
	// Cancelled counts tasks taken back (lease lost, cancelled in the
	// queue); Released, tasks given back unfinished.
	Cancelled int
	Released  int
}

// Waiter is a task source that can tell a queue with nothing claimable
// right now from a drained one, and wait for a claimable task (the team
// queue).
type Waiter interface {
	// Drained reports whether no task is left that could still run, and
	// describes what is left.
	Drained(ctx context.Context) (bool, string, error)
	// WaitNext is Next waiting up to d for a claimable task.
	WaitNext(ctx context.Context, d time.Duration) (*protocol.Task, error)
}

// idleSlice is one wait for a claimable task: the queue is asked whether
// it drained between two waits.
const idleSlice = 5 * time.Second

// Checker decides whether a task is complete besides verify (pipeline
// exit conditions). Sources may implement it.
type Checker interface {
	Check(ctx context.Context, t *protocol.Task, answer string, iteration int) (ok bool, detail string, err error)
}

// Prompter builds a task's prompt for an iteration (pipeline stages with
// variables). Sources may implement it.
type Prompter interface {
	Prompt(t *protocol.Task, iteration int) string
}

// Runner drives the state machine.
type Runner struct {
	o     Options
	state State
	step  int
	usage protocol.Usage // the session's, a resumed session's earlier usage included
	// own is this process's usage: the worker record's, which leaves out
	// what a resumed session used before (an earlier process's, counted
	// in spent or in that worker's record).
	own   protocol.Usage
	tools []protocol.ToolDef
	sys   string
	cur   *taskRun
	res   Result
	est   *Estimator
	times timings
	steps int // model turns of this process
	// velFile is the velocity file (Options.VelocityFile), if any.
	velFile *velocityFile
	// usageEstimated: a call was charged at the loop's estimate (the
	// provider reported no usage), which is logged once.
	usageEstimated bool

	failReason string
	failRetry  bool
	failLimit  bool
	fatalErr   error

	runCtx    context.Context
	wmu       sync.Mutex
	worker    *protocol.Worker
	lastWrite time.Time
	curMu     sync.Mutex // guards cur (for the heartbeat and serve's abort) and abortNext
	// abortNext is an abort that came while a task was picked but not yet
	// current: it cancels that task as it starts (guarded by curMu).
	abortNext error
	waiting   atomic.Bool // waiting for a claimable task: the heartbeat counts it as progress
	// lookup brings the model's row while the run starts (Options.Lookup).
	lookup chan lookupResult
	// memErr is the first session memory append that failed: the run
	// stops before its next step.
	memErr error
	// toolsDied says the tools coprocess died during the last tool call:
	// a second death in a row ends the run.
	toolsDied bool
	// last is the conversation of the task that ended last (FollowUpBase),
	// for a follow-up task; lastTask its id.
	last     []protocol.Message
	lastTask string
}

type taskRun struct {
	task        *protocol.Task
	ctx         context.Context
	cancel      context.CancelCauseFunc
	conv        []protocol.Message
	steps       int
	iter        int
	verifyFails int
	breaker     Breaker
	calls       []protocol.ToolCall
	results     []protocol.ToolResult
	answer      string
	partial     string // answers cut off at max_tokens, awaiting their end
	lastVerify  string
	usage       protocol.Usage
	lastRenew   time.Time
	// summaryAgain is the conversation length before which no new summary
	// is made: the last one did not bring it under the hard threshold.
	summaryAgain int
	// resumedAnswer: the task was resumed after its final answer, which
	// goes back to verify without a model call.
	resumedAnswer bool
}

// NewRunner checks the options and returns a runner.
func NewRunner(o Options) (*Runner, error) {
	if o.LLM == nil || o.Tools == nil || o.Source == nil || o.Events == nil {
		return nil, errors.New("loop: a model, tools, a task source and an emitter are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 10 * time.Second
	}
	if o.KeepMessages <= 0 {
		o.KeepMessages = 8
	}
	if o.ContextSoft <= 0 {
		o.ContextSoft = DefaultContextSoft
	}
	if o.ContextHard <= 0 {
		o.ContextHard = DefaultContextHard
	}
	if o.ContextSoft > o.ContextHard || o.ContextHard > 1 {
		return nil, fmt.Errorf("loop: the context thresholds must be 0 < soft (%g) ≤ hard (%g) ≤ 1", o.ContextSoft, o.ContextHard)
	}
	if err := o.checkWindow(); err != nil {
		return nil, err
	}
	if o.Workdir == "" {
		o.Workdir = "."
	}
	if o.Commit && o.Repo == nil {
		return nil, errors.New("loop: commit needs the repository, opened before the model runs (OpenRepo)")
	}
	if o.Guard == nil {
		o.Guard = guard.New(guard.Off)
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	model := o.Model
	if o.ModelInfo != nil && o.ModelInfo.ID != "" {
		model = o.ModelInfo.ID
	}
	if o.Lookup != nil && o.Lookup.ID != "" {
		model = o.Lookup.ID
	}
	r := &Runner{o: o, state: Idle, est: NewEstimator(model)}
	if o.VelocityFile != "" {
		r.velFile = newVelocityFile(o.VelocityFile)
	}
	return r, nil
}

// checkWindow refuses a context window that leaves no room for the
// conversation.
func (o *Options) checkWindow() error {
	if o.ContextWindow > 0 && o.ContextWindow-o.MaxTokens-o.Reserve < minOutputTokens*4 {
		return fmt.Errorf("loop: a context window of %d tokens leaves no room once max_tokens (%d) and the reserve (%d) are kept free", o.ContextWindow, o.MaxTokens, o.Reserve)
	}
	return nil
}

var errLeaseLost = errors.New("lease lost: another worker may hold the task")

// Run runs until every task has ended (done) or the run cannot go on
// (failed). The last stdout line is <POWERGLIDE_DONE> or
// <POWERGLIDE_ERROR>, except when a signal interrupted the run.
func (r *Runner) Run(ctx context.Context) Result {
	// The events wait in the emitter for the loop to wait: they are
	// written when it returns, and also when a bug panics.
	defer r.o.Events.Flush() // its error is Err's
	r.runCtx = ctx
	r.times.start = time.Now()
	hbCtx, stopHB := context.WithCancel(context.Background())
	var hbDone chan struct{}
	if r.o.Team != nil {
		if unmark := r.markWorker(); unmark != nil {
			defer unmark()
		}
		r.initWorker()
		hbDone = make(chan struct{})
		go r.heartbeat(hbCtx, hbDone)
	}
	if s := r.o.Session; s != nil {
		s.Info.Status = "running"
		s.Info.PID = os.Getpid()
		_, s.Info.PIDStart, _ = proc.Self()
		if s.Torn > 0 {
			r.log("warn", "session %s: %s ended with %d bytes of a record cut short (a write interrupted): cut back to the last whole record", s.Info.ID, MemoryFile, s.Torn)
		}
		if r.o.Resume != nil {
			for _, w := range r.o.Resume.Warnings {
				r.log("warn", "session %s: %s", s.Info.ID, w)
			}
			r.usage = r.o.Resume.Usage
			r.step = max(s.Info.Step, r.o.Resume.TotalSteps)
			r.last, r.lastTask = r.o.Resume.Last, r.o.Resume.LastTask
		}
	}
	// The model coprocess starts now, while the tasks load, not at the
	// first request (the tools coprocess with the list, in load_tasks: the
	// list and the model are what the first request waits for). Starting
	// the tools first instead, when their coprocess lists them, made no
	// difference to the launch (alternating runs, medians of 60).
	start(r.o.LLM)
	r.lookModelUp(ctx)
	r.fire(Start, "")
	for !r.state.Terminal() {
		if ctx.Err() != nil {
			r.interrupt(ctx)
			break
		}
		var in Input
		var reason string
		if r.memErr != nil {
			// Going on would do work the session cannot remember: a
			// resume would repeat it, or replay a conversation with a
			// hole in it.
			in, reason = r.fatal(fmt.Errorf("%w: the run stops, so that a resume goes on from the last record written", r.memErr))
		} else {
			in, reason = r.handle(ctx)
		}
		if ctx.Err() != nil {
			r.interrupt(ctx)
			break
		}
		r.fire(in, reason)
	}
	stopHB()
	if hbDone != nil {
		<-hbDone
	}
	r.res.State = r.state
	r.finishSession()
	if r.o.Team != nil {
		r.updateWorker(func(w *protocol.Worker) {
			w.State = string(r.state)
			w.Task = ""
			w.Paused = false
		})
	}
	failed := !r.res.Signal && !r.res.Idle && r.state != Done
	if failed && !r.o.Events.Text() {
		// In JSON mode the error pg-loop prints on stderr is also a
		// record (DESIGN.md §2), before the summary and the marker.
		code, kind, msg := r.res.Failure()
		r.o.Events.Emit(protocol.ErrorEvent{Type: protocol.EventError, Tool: "pg-loop", Kind: kind, Message: msg, ExitCode: code})
	}
	sum := r.summary()
	sum.Resources = r.resources()
	r.o.Events.Emit(sum)
	switch {
	case r.res.Signal, r.res.Idle:
	case r.state == Done:
		r.o.Events.Marker(MarkerDone)
	default:
		r.o.Events.Marker(MarkerError)
	}
	return r.res
}

// Failure is how a failed run (State Failed) is reported, on stderr and in
// JSON mode as its {"type":"error"} record: the exit code (4 for a limit, 2
// for bad input found as the run started, such as a dollar budget without
// prices, 1 otherwise), the kind (limit, usage, or the model error's kind
// when no retry or fallback can help) and the message on one line.
func (res Result) Failure() (code int, kind, msg string) {
	code, msg = cli.ExitFailure, "unknown failure"
	if res.Err != nil {
		msg = res.Err.Error()
	}
	var le *LimitError
	var me *ModelError
	var bad cli.UsageError
	switch {
	case errors.As(res.Err, &le):
		code, kind = cli.ExitLimit, "limit"
	case errors.As(res.Err, &bad) && bad.BadInput():
		code, kind = cli.ExitUsage, "usage"
	case errors.As(res.Err, &me) && me.Unrecoverable():
		msg, kind = "unrecoverable: "+msg, me.Event.Kind
	}
	return code, kind, termtext.OneLine(msg, 0)
}

func (r *Runner) interrupt(ctx context.Context) {
	r.res.Signal = true
	r.fatalErr = context.Cause(ctx)
	if r.fatalErr == nil {
		r.fatalErr = ctx.Err()
	}
	r.fire(Fatal, "interrupted: "+r.fatalErr.Error())
}

// fire applies an input: the transition, its event, and what ending a
// task or the run implies.
func (r *Runner) fire(in Input, reason string) {
	from := r.state
	to, err := Next(from, in)
	if err != nil {
		// A driver bug; stop rather than run on in an unknown state.
		r.fatalErr = err
		to, in, reason = Failed, Fatal, err.Error()
	}
	switch in {
	case TaskFailed:
		r.endTask(protocol.StatusFailed, r.failReason, r.failRetry)
	case Fatal:
		if r.cur != nil {
			if r.failLimit {
				r.endTask(protocol.StatusFailed, reason, false)
			} else {
				r.endTask("released", reason, false)
			}
		}
		if r.res.Err == nil {
			r.res.Err = r.fatalErr
			if r.res.Err == nil {
				r.res.Err = errors.New(reason)
			}
		}
	}
	r.state = to
	ev := &protocol.LoopStateEvent{Type: protocol.LoopState, TS: r.now(), Worker: r.o.Worker, Step: r.step, From: string(from), To: string(to), Reason: reason}
	if r.o.Session != nil {
		ev.Session = r.o.Session.Info.ID
	}
	if r.cur != nil {
		ev.Task = r.cur.task.ID
	}
	r.o.Events.Emit(ev)
	if r.o.Team != nil {
		busy := r.busyFor(to)
		r.updateWorker(func(w *protocol.Worker) {
			w.State = string(to)
			w.Step = r.step
			w.ProgressAt = r.now()
			w.BusyUntil = time.Time{}
			if busy > 0 {
				w.BusyUntil = w.ProgressAt.Add(busy)
			}
			w.Usage = r.own
			if r.cur != nil {
				w.Task = r.cur.task.ID
			} else {
				w.Task = ""
			}
		})
	}
	if s := r.o.Session; s != nil {
		s.mu.Lock()
		s.Info.State, s.Info.Step, s.Info.Usage = string(to), r.step, r.usage
		s.mu.Unlock()
	}
	r.failReason, r.failRetry, r.failLimit = "", false, false
}

func (r *Runner) now() time.Time { return r.o.Now().UTC() }

// busyFor is how long the state entered may take by its own timeouts: a
// verify run its --verify-timeout, a turn's tool calls the sum of theirs
// (callBound), with callSlack for ending and reporting them; 0 for the
// other states. The worker record says until when (busy_until), and
// pg-monitor does not call the worker stuck before: a 20-minute test
// suite under a 10-minute --stall is no stall.
func (r *Runner) busyFor(to State) time.Duration {
	switch {
	case to == Verify && r.o.VerifyTimeout > 0:
		return r.o.VerifyTimeout + callSlack
	case to == Executing && r.cur != nil:
		var d time.Duration
		for i, c := range r.cur.calls {
			if i < len(r.cur.results) && r.cur.results[i].Type == "" {
				d += callBound(c)
			}
		}
		if d > 0 {
			return d + callSlack
		}
	}
	return 0
}

// callSlack is the time past a call's own timeout for ending it (a
// process group's grace) and reporting it. busy_until is written like
// progress_at: within workerWriteEvery, or at the next heartbeat, long
// before any stall limit; an fsync more per step it is not worth.
const callSlack = time.Minute

func (r *Runner) log(level, format string, args ...any) {
	r.o.Events.Emit(&protocol.LoopLogEvent{Type: protocol.LoopLog, TS: r.now(), Level: level, Message: fmt.Sprintf(format, args...)})
}

// taskFail prepares a TaskFailed input.
func (r *Runner) taskFail(reason string, retry bool) (Input, string) {
	r.failReason, r.failRetry = reason, retry
	return TaskFailed, reason
}

// limit reports a limit; run-scoped limits end the run.
func (r *Runner) limit(le *LimitError, runScoped bool) (Input, string) {
	r.res.Limit = true
	ev := &protocol.LoopLimitEvent{Type: protocol.LoopLimit, TS: r.now(), Step: r.step, Limit: le.Limit, Pattern: le.Pattern, Reason: le.Reason}
	if r.cur != nil {
		ev.Task = r.cur.task.ID
	}
	r.o.Events.Emit(ev)
	if runScoped {
		// The team's budget leaves the task to a worker of a team with
		// budget left (it is released); the run's own limits fail it.
		r.failLimit = le.Limit != LimitTeamBudget
		r.fatalErr = le
		return Fatal, le.Error()
	}
	r.failReason = le.Error()
	return TaskFailed, le.Error()
}

func (r *Runner) fatal(err error) (Input, string) {
	r.fatalErr = err
	return Fatal, err.Error()
}

func (r *Runner) handle(ctx context.Context) (Input, string) {
	switch r.state {
	case Idle:
		return Start, ""
	case LoadTasks:
		return r.loadTasks(ctx)
	case PickTask:
		return r.pickTask(ctx)
	case Thinking:
		return r.thinking(ctx)
	case ToolCall:
		return r.toolCall()
	case Executing:
		return r.executing()
	case Observing:
		return r.observing()
	case Verify:
		return r.verify()
	case Commit:
		return r.commit()
	}
	return r.fatal(fmt.Errorf("loop: no handler for state %s", r.state))
}

// start starts a coprocess component in the background, ahead of its
// first use.
func start(component any) {
	if s, ok := component.(interface{ Start() }); ok {
		s.Start()
	}
}

func (r *Runner) loadTasks(ctx context.Context) (Input, string) {
	skillsPrompt := r.discoverSkills() // meanwhile: the list takes a process
	defs, err := r.o.Tools.List(ctx)
	if err != nil {
		return r.fatal(err)
	}
	start(r.o.Tools)
	if err := r.modelFound(ctx); err != nil {
		return r.fatal(err)
	}
	r.tools = defs
	r.sys = r.o.System
	if r.sys == "" {
		r.sys = DefaultSystem
	}
	if r.o.VelocityFile != "" {
		r.sys += paceNote()
	}
	if r.o.NoContextFiles {
		r.log("info", "project context files (AGENTS.md, CLAUDE.md) left out")
	} else {
		pc, warns := ProjectContext(r.o.Workdir)
		for _, w := range warns {
			r.log("warn", "%v", w)
		}
		if pc != "" {
			r.sys += "\n\n# Project context\n" + pc
		}
	}
	r.sys += skillsPrompt(defs)
	r.o.Guard.Trust(r.sys)
	if m := r.o.ModelInfo; m != nil {
		prices := "prices unknown"
		if m.Priced() {
			prices = fmt.Sprintf("$%g in, $%g out per million tokens", m.InputPerMTok, m.OutputPerMTok)
		}
		r.log("info", "model %s: context window %d tokens, %s", m.ID, m.ContextWindow, prices)
	}
	return Loaded, fmt.Sprintf("%d tools", len(defs))
}

func (r *Runner) pickTask(ctx context.Context) (Input, string) {
	var t *protocol.Task
	var restore *Replay
	if rp := r.o.Resume; rp != nil && rp.Current != nil {
		r.o.Resume = nil
		if qs, ok := r.o.Source.(*QueueSource); ok {
			if err := qs.Renew(ctx, rp.Current); err == nil {
				t, restore = rp.Current, rp
			} else {
				r.log("warn", "resumed task %s is no longer ours (%v); claiming anew", rp.Current.ID, err)
			}
		} else {
			restore = rp
		}
	}
	if t == nil {
		var err error
		t, err = r.o.Source.Next(ctx)
		if w, ok := r.o.Source.(Waiter); ok && t == nil && err == nil {
			t, err = r.waitTask(ctx, w)
		}
		if err != nil {
			if ctx.Err() != nil {
				return Fatal, "interrupted"
			}
			return r.fatal(fmt.Errorf("pick a task: %w", err))
		}
	}
	if t == nil {
		r.cancelQueued()
	}
	if t == nil && r.res.Idle {
		return Empty, "no claimable task within the idle wait; left: " + r.res.IdleLeft
	}
	if t == nil {
		return Empty, "no task left"
	}
	tctx, cancel := context.WithCancelCause(ctx)
	tr := &taskRun{task: t, ctx: tctx, cancel: cancel, lastRenew: r.now()}
	tr.breaker = Breaker{SameMax: r.o.BreakerSame, FailMax: r.o.BreakerFailures, OutputMax: r.o.BreakerOutput, CycleMax: r.o.BreakerCycle}
	if resumable(restore, t) {
		r.resume(tr, restore)
	} else {
		if it, ok := r.o.Source.(interface{ Iterations(*protocol.Task) int }); ok {
			tr.iter = it.Iterations(t)
		}
		first := r.userMessage(r.taskPrompt(t, tr.iter+1, ""))
		prev, follows := r.followUp(t)
		tr.conv = append(prev, first)
		r.remember(MemoryRecord{Type: MemTask, Task: t.ID, Status: "started", TaskRec: t, Follows: follows})
		r.remember(MemoryRecord{Type: MemMessage, Task: t.ID, Message: &first})
	}
	r.curMu.Lock()
	r.cur = tr
	if r.abortNext != nil {
		tr.cancel(r.abortNext)
		r.abortNext = nil
	}
	r.curMu.Unlock()
	if s := r.o.Session; s != nil {
		s.mu.Lock()
		s.Info.Task = t.ID
		s.mu.Unlock()
		r.saveSession()
	}
	r.o.Events.Emit(&protocol.LoopTaskEvent{Type: protocol.LoopTask, TS: r.now(), Task: t.ID, Title: t.Title, Status: "started", Usage: protocol.Usage{}})
	return Picked, t.ID
}

// waitTask waits for a claimable task while the queue is not drained:
// other workers may still finish the tasks that block the rest, or give
// theirs back. <POWERGLIDE_DONE> means every task ended, so a worker of a
// swarm does not print it (and pg-monitor does not retire it) while work
// remains. It returns nil when the queue drained or IdleWait passed
// (Result.Idle).
func (r *Runner) waitTask(ctx context.Context, w Waiter) (*protocol.Task, error) {
	r.waiting.Store(true)
	defer r.waiting.Store(false)
	defer func(start time.Time) { r.times.wait += time.Since(start) }(time.Now())
	var until time.Time
	if r.o.IdleWait > 0 {
		until = time.Now().Add(r.o.IdleWait)
	}
	logged := false
	for {
		drained, left, err := w.Drained(ctx)
		if err != nil || drained {
			return nil, err
		}
		d := idleSlice
		if !until.IsZero() {
			rem := time.Until(until)
			if rem <= 0 {
				r.res.Idle, r.res.IdleLeft = true, left
				return nil, nil
			}
			d = min(d, rem)
		}
		if !logged {
			logged = true
			r.log("info", "no claimable task, the queue is not drained (%s): waiting", left)
		}
		t, err := w.WaitNext(ctx, d)
		if err != nil || t != nil {
			return t, err
		}
	}
}

func (r *Runner) userMessage(text string) protocol.Message {
	r.o.Guard.Trust(text)
	return protocol.Message{Role: protocol.RoleUser, Content: protocol.Content{{Type: protocol.BlockText, Text: text}}}
}

// taskPrompt is the first user message of a task (or of a fresh iteration).
func (r *Runner) taskPrompt(t *protocol.Task, iter int, lastVerify string) string {
	var b strings.Builder
	if p, ok := r.o.Source.(Prompter); ok {
		b.WriteString(p.Prompt(t, iter))
	} else {
		b.WriteString(t.Prompt)
		if t.Prompt == "" {
			b.WriteString(t.Title)
		}
	}
	if v := r.verifyCmd(t); v != "" {
		fmt.Fprintf(&b, "\n\nThe work is checked by running `%s`; it must pass.", v)
	}
	if w := r.promise(t); w != "" {
		fmt.Fprintf(&b, "\n\nWhen, and only when, the task is completely done, end your final answer with <promise>%s</promise>. Saying it early does not end the work: the check still has to pass.", w)
	}
	if iter > 1 {
		fmt.Fprintf(&b, "\n\nThis is iteration %d. Earlier iterations left their work in the files and in git: look at the current state before you act.", iter)
		if lastVerify != "" {
			fmt.Fprintf(&b, "\nThe last check failed:\n```\n%s\n```", lastVerify)
		}
	}
	return b.String()
}

func label(t *protocol.Task, k string) string {
	if t.Labels == nil {
		return ""
	}
	return t.Labels[k]
}

func (r *Runner) verifyCmd(t *protocol.Task) string {
	if t.Verify != "" {
		return t.Verify
	}
	return r.o.Verify
}

func (r *Runner) promise(t *protocol.Task) string {
	if p := label(t, "promise"); p != "" {
		return p
	}
	return r.o.Promise
}

func (r *Runner) fresh(t *protocol.Task) bool {
	if f := label(t, "fresh"); f != "" {
		b, _ := strconv.ParseBool(f)
		return b
	}
	return r.o.Fresh
}

func (r *Runner) maxIterations(t *protocol.Task) int {
	if m := label(t, "max_iterations"); m != "" {
		if n, err := strconv.Atoi(m); err == nil {
			return n
		}
	}
	return r.o.MaxIterations
}

// verifyCap reports whether the verify cap applies to t: always when it
// was asked for, otherwise only when no iteration cap governs the task.
func (r *Runner) verifyCap(t *protocol.Task) bool {
	if r.o.MaxVerify <= 0 {
		return false
	}
	return r.o.MaxVerifySet || r.maxIterations(t) <= 0
}

func (r *Runner) remember(rec MemoryRecord) {
	if r.o.Session == nil {
		return
	}
	rec.TS = r.now()
	if err := r.o.Session.Append(rec); err != nil && r.memErr == nil {
		r.memErr = err
		r.log("error", "%v", err)
	}
}

func (r *Runner) addMessage(m protocol.Message, u *protocol.Usage) {
	r.cur.conv = append(r.cur.conv, m)
	r.remember(MemoryRecord{Type: MemMessage, Task: r.cur.task.ID, Message: &m, Usage: u})
}

func (r *Runner) request(conv []protocol.Message) *protocol.Request {
	return &protocol.Request{Model: r.o.Model, System: r.sys, Messages: conv, Tools: r.tools, MaxTokens: r.o.MaxTokens, Cache: true}
}

// paceSlice bounds one sleep of pace: the velocity file is read again
// after each, so a change shows within a slice even in a long delay.
const paceSlice = 200 * time.Millisecond

// pace applies the velocity: a delay of 1000/velocity ms before each step,
// or a pause while it is 0. The delay is slept in slices, re-reading the
// velocity after each: a new velocity counts from the start of the delay
// (a faster one may end it at once), 0 pauses it. The worker record shows
// the pause.
func (r *Runner) pace(ctx context.Context) error {
	paused := false
	defer func() {
		if paused {
			r.log("info", "velocity > 0: resumed")
			r.updateWorker(func(w *protocol.Worker) { w.Paused = false })
		}
	}()
	start := time.Now()
	for {
		v, set := r.velocity(ctx)
		if !set {
			r.updateWorker(func(w *protocol.Worker) { w.Velocity = 1 })
			return nil
		}
		if v > 0 {
			r.updateWorker(func(w *protocol.Worker) { w.Velocity = v; w.Paused = false })
			if paused {
				// The delay counts from the end of the pause.
				paused = false
				start = time.Now()
				r.log("info", "velocity > 0: resumed")
			}
			left := VelocityDelay(v) - time.Since(start)
			if left <= 0 {
				return ctx.Err()
			}
			if err := sleep(ctx, min(left, paceSlice)); err != nil {
				return err
			}
			continue
		}
		if !paused {
			paused = true
			r.log("info", "velocity 0: paused")
			r.updateWorker(func(w *protocol.Worker) { w.Velocity = 0; w.Paused = true })
		}
		if err := sleep(ctx, paceSlice); err != nil {
			return err
		}
	}
}

// velocity is the pace in force: the operator's setting in the team's
// store (pg-dash's keys; worker-<n>.velocity on files) when it is not the
// default 1, else the velocity file (which the model may write), else
// --velocity; set is false for none of them (full speed).
func (r *Runner) velocity(ctx context.Context) (v float64, set bool) {
	v, set = r.o.Velocity, r.o.VelocitySet
	if r.velFile != nil {
		fv, fset, err := r.velFile.read()
		if err != nil {
			r.log("warn", "%v", err)
		} else if fset {
			v, set = fv, true
		}
	}
	if r.o.Team != nil {
		sv, err := r.o.Team.Workers().Velocity(ctx, r.o.Worker)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				r.log("warn", "velocity: %v", err)
			}
		case sv != 1:
			v, set = sv, true
		}
	}
	return v, set
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r *Runner) thinking(ctx context.Context) (Input, string) {
	tr := r.cur
	if tr.ctx.Err() != nil { // aborted, or its lease lost, before this step
		return r.taskCtxErr()
	}
	if tr.resumedAnswer {
		tr.resumedAnswer = false
		tr.answer = r.guardAnswer(resumedAnswer(tr.conv))
		return Answer, "resumed after the final answer: checking it again"
	}
	paceStart := time.Now()
	err := r.pace(tr.ctx)
	r.times.wait += time.Since(paceStart)
	if err != nil {
		return r.taskCtxErr()
	}
	if r.o.MaxSteps > 0 && tr.steps >= r.o.MaxSteps {
		return r.limit(&LimitError{Limit: LimitSteps, Reason: fmt.Sprintf("%d steps taken, the limit is %d", tr.steps, r.o.MaxSteps)}, false)
	}
	r.steer(tr)
	if err := r.window(tr.ctx); err != nil {
		return r.windowFailure(err)
	}
	req := r.request(tr.conv)
	est := r.est.Request(req)
	if err := r.o.Budget.Check(r.usage, est, r.o.MaxTokens); err != nil {
		return r.limit(err.(*LimitError), true)
	}
	r.step++
	r.steps++
	tr.steps++
	end, err := r.stepCall(tr.ctx, req)
	var me *ModelError
	if errors.As(err, &me) && me.Event.Kind == protocol.KindContextOverflow && tr.ctx.Err() == nil {
		// The estimate was short: it is raised, and the conversation
		// compacted to well under it, once.
		r.log("warn", "context overflow reported by the model at about %d estimated tokens: compacting and retrying", est)
		r.est.Raise(1.2)
		if cerr := r.compact(tr.ctx, r.est.Request(req), true); cerr != nil {
			return r.windowFailure(cerr)
		}
		req = r.request(tr.conv)
		if berr := r.o.Budget.Check(r.usage, r.est.Request(req), r.o.MaxTokens); berr != nil {
			return r.limit(berr.(*LimitError), true)
		}
		end, err = r.stepCall(tr.ctx, req)
		if errors.As(err, &me) && me.Event.Kind == protocol.KindContextOverflow && tr.ctx.Err() == nil {
			return r.taskFail(fmt.Sprintf("context overflow: the model still found the conversation too long after compacting it to about %d tokens: %s", r.est.Request(req), termtext.OneLine(me.Event.Message, 200)), false)
		}
	}
	if le := (*LimitError)(nil); errors.As(err, &le) {
		return r.limit(le, true) // the team's budget refused the call
	}
	if err != nil {
		if tr.ctx.Err() != nil {
			return r.taskCtxErr()
		}
		return r.modelFailure(err)
	}
	msg := end.Message
	msg.Role = protocol.RoleAssistant
	if len(msg.Content) == 0 {
		msg.Content = protocol.Content{{Type: protocol.BlockText, Text: ""}}
	}
	u := end.Usage
	r.spend(u)
	tr.usage = tr.usage.Add(u)
	r.addMessage(msg, &u)
	text, thinking := msg.Content.Text(), ""
	for _, b := range msg.Content {
		if b.Type == protocol.BlockThinking {
			thinking += b.Thinking
		}
	}
	r.o.Events.Emit(&protocol.LoopAssistantEvent{Type: protocol.LoopAssistant, TS: r.now(), Task: tr.task.ID, Step: r.step, Text: text, Thinking: thinking, Model: end.Model, Usage: u, Total: r.usage})
	tr.calls = msg.Content.ToolCalls()
	if len(tr.calls) > 0 {
		return ToolCalls, fmt.Sprintf("%d tool calls", len(tr.calls))
	}
	if end.StopReason == protocol.StopMaxTokens {
		// Not a final answer: checking it would judge half a sentence
		// (and miss a promise at its end).
		tr.partial += text
		r.addMessage(r.userMessage(continueMessage(end.Incomplete)), nil)
		return Truncated, "max_tokens: the answer was cut off, asking the model to go on"
	}
	tr.answer = r.guardAnswer(tr.partial + text)
	tr.partial = ""
	return Answer, end.StopReason
}

// stepCall makes a step's model call. One that failed in a passing way
// (passing: pg-llm retries them itself, but not once the answer started,
// and not past its own limits) is made again after Options.ModelRetryWait,
// then after three times it: the partial answer never reached the
// conversation, so the same request is safe to send again, and one reset
// connection does not fail hours of work. Each call passes the budgets
// again (a *LimitError).
func (r *Runner) stepCall(ctx context.Context, req *protocol.Request) (*protocol.EndEvent, error) {
	end, err := r.callModel(ctx, req)
	wait := r.o.ModelRetryWait
	for try := 1; try <= modelRetries && wait > 0; try++ {
		var me *ModelError
		if !errors.As(err, &me) || !passing(me.Event) || ctx.Err() != nil {
			break
		}
		r.log("warn", "model call failed: %v; making it again in %v (%d of %d)", err, wait, try, modelRetries)
		start := time.Now()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			r.times.wait += time.Since(start)
			return nil, err
		case <-t.C:
		}
		r.times.wait += time.Since(start)
		if berr := r.o.Budget.Check(r.usage, r.est.Request(req), r.o.MaxTokens); berr != nil {
			return nil, berr
		}
		end, err = r.callModel(ctx, req)
		wait *= 3
	}
	return end, err
}

// modelRetries is how many times stepCall makes a failed call again.
const modelRetries = 2

// passing says whether a model error may not happen again soon: a cut
// connection, an overloaded or failing server, a rate limit, a timeout.
func passing(ev protocol.ErrorEvent) bool {
	switch ev.Kind {
	case protocol.KindNetwork, protocol.KindOverloaded, protocol.KindServer, protocol.KindRateLimit, protocol.KindTimeout:
		return true
	}
	return false
}

const continueText = "Your answer was cut off at the max_tokens limit. Continue exactly where it stopped, without repeating what you already wrote."

// continueMessage asks the model to go on after max_tokens. A tool call
// cut off in its input was not run: the model is told so, since going on
// "where it stopped" would mean writing the rest of its JSON as text.
func continueMessage(incomplete []protocol.IncompleteToolCall) string {
	if len(incomplete) == 0 {
		return continueText
	}
	var names []string
	for _, c := range incomplete {
		names = append(names, c.Name)
	}
	return fmt.Sprintf("Your answer was cut off at the max_tokens limit while you were writing the input of a call to %s; that call was not run. Make it again, with a smaller input if it was large (for example, write a big file in parts).", strings.Join(names, ", "))
}

// taskCtxErr turns a cancelled task context into its input: the run's
// signal, or the task's lost lease.
func (r *Runner) taskCtxErr() (Input, string) {
	if r.runCtx.Err() != nil {
		return Fatal, "interrupted"
	}
	cause := context.Cause(r.cur.ctx)
	r.failReason = cause.Error()
	return TaskFailed, cause.Error()
}

func (r *Runner) modelFailure(err error) (Input, string) {
	msg := err.Error()
	r.updateWorker(func(w *protocol.Worker) { w.LastError = &msg })
	var me *ModelError
	if errors.As(err, &me) && me.Unrecoverable() {
		return r.fatal(err)
	}
	if errors.As(err, &me) {
		return r.taskFail(err.Error(), retryTask(me.Event))
	}
	// The component itself broke (it died, wrote garbage): nothing else
	// will work either.
	return r.fatal(err)
}

// retryTask says whether a task failed by a model error deserves another
// attempt. A bad request, or an answer too large to stream (the model
// would very likely write it again), will not go better the next time;
// the other kinds (overload, rate limits, network) are passing.
func retryTask(ev protocol.ErrorEvent) bool {
	if ev.Retryable {
		return true
	}
	switch ev.Kind {
	case protocol.KindBadRequest, protocol.KindResponseTooLarge:
		return false
	}
	return true
}

func (r *Runner) onModelEvent(ev any) {
	switch e := ev.(type) {
	case *protocol.RetryEvent:
		r.log("warn", "model retry %d in %d ms: %s", e.Attempt, e.DelayMS, e.Reason)
	case *protocol.FallbackEvent:
		r.log("warn", "model fallback from %s to %s: %s", e.From, e.To, e.Reason)
	}
}

func (r *Runner) toolCall() (Input, string) {
	tr := r.cur
	tr.results = make([]protocol.ToolResult, len(tr.calls))
	for i, c := range tr.calls {
		r.o.Events.Emit(&protocol.LoopToolCallEvent{Type: protocol.LoopToolCall, TS: r.now(), Task: tr.task.ID, Step: r.step, Call: c})
		if err := tr.breaker.Call(c); err != nil {
			var le *LimitError
			errors.As(err, &le)
			return r.limit(le, false)
		}
		if len(c.Input) > 0 && !json.Valid(c.Input) {
			tr.results[i] = failedResult(c, "the input is not valid JSON")
			continue
		}
		if fs := r.o.Guard.CheckCall(c); len(fs) > 0 {
			r.guardEvents(fs, &c)
			if r.o.Guard.Refuses() {
				tr.results[i] = failedResult(c, guard.Refusal(fs))
			}
		}
		if tr.results[i].Type == "" {
			res, run, err := r.approval(tr, c)
			if err != nil {
				return r.taskCtxErr()
			}
			if !run {
				tr.results[i] = res
			}
		}
	}
	return Parsed, ""
}

// guardEvents reports the guard's findings about call (nil: the final
// answer).
func (r *Runner) guardEvents(fs []guard.Finding, call *protocol.ToolCall) {
	action := "warned"
	if r.o.Guard.Refuses() {
		action = "refused"
		if call == nil {
			action = "removed"
		}
	}
	for _, f := range fs {
		ev := &protocol.LoopGuardEvent{Type: protocol.LoopGuard, TS: r.now(), Task: r.cur.task.ID, Step: r.step, Mode: string(r.o.Guard.Mode()),
			Action: action, Kind: f.Kind, Match: f.Match, Source: f.Source}
		if call != nil {
			ev.Tool, ev.CallID = call.Name, call.ID
		}
		r.o.Events.Emit(ev)
	}
}

// guardAnswer checks the final answer's Markdown images; in strict mode
// the ones from untrusted hosts are removed from what the task records.
func (r *Runner) guardAnswer(answer string) string {
	fs := r.o.Guard.CheckAnswer(answer)
	if len(fs) == 0 {
		return answer
	}
	r.guardEvents(fs, nil)
	if r.o.Guard.Refuses() {
		return guard.StripImages(answer, fs)
	}
	return answer
}

func (r *Runner) executing() (Input, string) {
	tr := r.cur
	var todo []protocol.ToolCall
	var idx []int
	for i, c := range tr.calls {
		if tr.results[i].Type == "" {
			todo = append(todo, c)
			idx = append(idx, i)
		}
	}
	if len(todo) > 0 {
		start := time.Now()
		res, err := r.o.Tools.Call(tr.ctx, todo)
		r.times.tools += time.Since(start)
		var died *DiedError
		if errors.As(err, &died) && tr.ctx.Err() == nil && !r.toolsDied && len(res) == len(todo) {
			// Its calls have error results for the model (DiedResult):
			// they are not made again, they may have done their work.
			r.log("warn", "tools: %v during a call: the model is told, a fresh one takes the next call", err)
			r.toolsDied, err = true, nil
		} else if err == nil {
			r.toolsDied = false
		}
		if err != nil {
			if tr.ctx.Err() != nil {
				return r.taskCtxErr()
			}
			return r.fatal(fmt.Errorf("tools: %w", err))
		}
		for j, i := range idx {
			if res[j].Untrusted {
				r.o.Guard.Untrusted(tr.calls[i].Name, res[j].Output)
			}
			tr.results[i] = redactResult(res[j])
		}
	}
	failed := 0
	for _, res := range tr.results {
		r.o.Events.Emit(&protocol.LoopToolResultEvent{Type: protocol.LoopToolResult, TS: r.now(), Task: tr.task.ID, Step: r.step, Result: res})
		if !res.OK {
			failed++
		}
	}
	if r.o.Team != nil && len(tr.results) > 0 {
		last := tr.results[len(tr.results)-1]
		r.updateWorker(func(w *protocol.Worker) {
			w.LastTool = last.Name
			if !last.OK && last.Error != nil {
				e := *last.Error
				w.LastError = &e
			}
		})
	}
	return Executed, fmt.Sprintf("%d ok, %d failed", len(tr.results)-failed, failed)
}

// redactResult removes secrets from a tool result before the model, the
// events or the session see it: the tools component runs without the keys
// pg-loop holds, so it cannot know their values.
func redactResult(res protocol.ToolResult) protocol.ToolResult {
	res.Output = secrets.RedactString(res.Output)
	if res.Error != nil {
		e := secrets.RedactString(*res.Error)
		res.Error = &e
	}
	return res
}

func (r *Runner) observing() (Input, string) {
	tr := r.cur
	blocks := make(protocol.Content, len(tr.results))
	for i, res := range tr.results {
		out := res.Text()
		if r.o.ContextWindow > 0 {
			out = r.cutOutput(res.Name, out, r.outputMax())
		}
		if res.Untrusted {
			out = guard.Wrap(tr.calls[i].Name, out)
		}
		blocks[i] = protocol.Block{Type: protocol.BlockToolResult, ID: tr.calls[i].ID, Output: out, IsError: !res.OK}
	}
	r.addMessage(protocol.Message{Role: protocol.RoleTool, Content: blocks}, nil)
	for i, res := range tr.results {
		if err := tr.breaker.Result(tr.calls[i], res); err != nil {
			var le *LimitError
			errors.As(err, &le)
			return r.limit(le, false)
		}
	}
	return Observed, ""
}

var promiseRE = lazyre.Compile(`(?s)<promise>\s*(.*?)\s*</promise>`)

// HasPromise reports whether text holds <promise>word</promise>.
func HasPromise(text, word string) bool {
	for _, m := range promiseRE().FindAllStringSubmatch(text, -1) {
		if m[1] == word {
			return true
		}
	}
	return false
}

// Iterated is a source that keeps the count of a task's iterations
// (pipeline stages).
type Iterated interface {
	Iterated(t *protocol.Task, iteration int)
}

func (r *Runner) verify() (Input, string) {
	tr := r.cur
	tr.iter++
	if it, ok := r.o.Source.(Iterated); ok {
		it.Iterated(tr.task, tr.iter)
	}
	var missing []string
	feedback := ""
	verified := true
	promiseOK := true
	if w := r.promise(tr.task); w != "" && !HasPromise(tr.answer, w) {
		promiseOK = false
		missing = append(missing, "promise")
		feedback = fmt.Sprintf("The task is not complete: your answer did not contain <promise>%s</promise>. Keep working; say it only when everything is done.", w)
	}
	if cmd := r.verifyCmd(tr.task); cmd != "" && promiseOK {
		start := time.Now()
		out, err := r.o.Verifier.Run(tr.ctx, cmd, r.o.Workdir, r.o.VerifyTimeout)
		r.times.verify += time.Since(start)
		if err != nil && tr.ctx.Err() != nil {
			return r.taskCtxErr()
		}
		if err != nil {
			out = VerifyOutcome{ExitCode: -1, Output: err.Error()}
		}
		if !out.OK {
			tr.verifyFails++
		}
		r.o.Events.Emit(&protocol.LoopVerifyEvent{Type: protocol.LoopVerify, TS: r.now(), Task: tr.task.ID, Step: r.step, Command: cmd, OK: out.OK, ExitCode: out.ExitCode, Output: out.Output, Attempt: tr.iter})
		if !out.OK {
			verified = false
			missing = append(missing, "verify")
			tr.lastVerify = strings.TrimSpace(fmt.Sprintf("`%s` exited %d\n%s", cmd, out.ExitCode, out.Output))
			feedback = fmt.Sprintf("The check `%s` failed (exit %d):\n```\n%s\n```\nFix the problem, then answer again with a summary.", cmd, out.ExitCode, out.Output)
			if r.promise(tr.task) != "" {
				feedback = "Your promise was refused: the work does not pass its check yet.\n" + feedback
			}
		} else {
			tr.lastVerify = ""
		}
	}
	if ck, ok := r.o.Source.(Checker); ok && promiseOK && verified {
		done, detail, err := ck.Check(tr.ctx, tr.task, tr.answer, tr.iter)
		if err != nil {
			return r.taskFail(fmt.Sprintf("exit condition: %v", err), false)
		}
		if !done {
			missing = append(missing, "exit condition")
			feedback = "The stage is not complete yet: " + detail + ". Keep working."
			tr.lastVerify = detail
		}
	}
	// Completion is checked before the limits.
	if len(missing) == 0 {
		return VerifyPassed, fmt.Sprintf("complete after %d iterations", tr.iter)
	}
	if r.verifyCap(tr.task) && tr.verifyFails >= r.o.MaxVerify && !verified {
		return r.limit(&LimitError{Limit: LimitVerify, Reason: fmt.Sprintf("verify failed %d times, the limit is %d", tr.verifyFails, r.o.MaxVerify)}, false)
	}
	if m := r.maxIterations(tr.task); m > 0 && tr.iter >= m {
		return r.limit(&LimitError{Limit: LimitIterations, Reason: fmt.Sprintf("%d iterations without completion (missing: %s), the limit is %d", tr.iter, strings.Join(missing, ", "), m)}, false)
	}
	if r.fresh(tr.task) {
		first := r.userMessage(r.taskPrompt(tr.task, tr.iter+1, tr.lastVerify))
		tr.conv = []protocol.Message{first}
		r.remember(MemoryRecord{Type: MemFresh, Task: tr.task.ID, Message: &first, Iteration: tr.iter})
	} else {
		r.addMessage(r.userMessage(feedback), nil)
	}
	return VerifyFailed, "missing: " + strings.Join(missing, ", ")
}

// TaskResult is what a completed task records in the queue.
type TaskResult struct {
	Summary string         `json:"summary"`
	Commit  string         `json:"commit,omitempty"`
	Usage   protocol.Usage `json:"usage"`
	Session string         `json:"session,omitempty"`
	Steps   int            `json:"steps"`
}

func (r *Runner) commit() (Input, string) {
	tr := r.cur
	if in, reason, ok := r.leaseHeld(); !ok {
		return in, reason
	}
	hash := ""
	if r.o.Commit {
		msg := CommitMessage(tr.answer, tr.task.Title)
		start := time.Now()
		h, err := r.o.Repo.Commit(tr.ctx, msg)
		r.times.verify += time.Since(start)
		if err != nil {
			if tr.ctx.Err() != nil {
				return r.taskCtxErr()
			}
			return r.taskFail(fmt.Sprintf("commit: %v", err), false)
		}
		hash = h
		r.o.Events.Emit(&protocol.LoopCommitEvent{Type: protocol.LoopCommit, TS: r.now(), Task: tr.task.ID, Hash: h, Message: strings.TrimSpace(msg), Skipped: h == ""})
	}
	res := TaskResult{Summary: strings.TrimSpace(promiseRE().ReplaceAllString(tr.answer, "")), Commit: hash, Usage: tr.usage, Steps: tr.steps}
	if r.o.Session != nil {
		res.Session = r.o.Session.Info.ID
	}
	b, _ := json.Marshal(res)
	if err := r.o.Source.Complete(tr.ctx, tr.task, b); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			r.failReason = errLeaseLost.Error()
			return TaskFailed, errLeaseLost.Error()
		}
		if tr.ctx.Err() != nil {
			return r.taskCtxErr()
		}
		return r.fatal(fmt.Errorf("complete task %s: %w", tr.task.ID, err))
	}
	r.res.TasksDone++
	r.closeTask(protocol.StatusDone, "")
	return Committed, hash
}

// errLeaseLostBeforeCommit is the reason of a task whose lease was gone
// when the work was about to be committed.
var errLeaseLostBeforeCommit = errors.New("lease lost before commit: nothing committed; another worker may hold the task")

// leaseHeld checks, right before the commit, that the task's lease is still
// this worker's: a renewal with its fencing token, which fails once another
// worker holds the task (the lease ran out during a long verify, a pause, a
// stopped process, and the task was claimed again). Then nothing is
// committed, in git or in the queue: the work is the new holder's to do and
// commit. The renewal also extends the lease, so it cannot run out between
// the check and the commit. With ok false, in and reason are the outcome.
func (r *Runner) leaseHeld() (in Input, reason string, ok bool) {
	tr := r.cur
	err := r.o.Source.Renew(tr.ctx, tr.task)
	switch {
	case err == nil:
		// lastRenew is the heartbeat goroutine's alone: its next renewal
		// comes a little early, which costs nothing.
		return "", "", true
	case errors.Is(err, ErrLeaseLost):
		token := int64(0)
		if tr.task.Claim != nil {
			token = tr.task.Claim.Token
		}
		r.log("warn", "task %s: lease lost before commit (token %d): nothing committed: %v", tr.task.ID, token, err)
		tr.cancel(errLeaseLostBeforeCommit) // the task is not ours to fail or release
		r.failReason = errLeaseLostBeforeCommit.Error()
		return TaskFailed, r.failReason, false
	case tr.ctx.Err() != nil:
		in, reason = r.taskCtxErr()
		return in, reason, false
	}
	// The queue cannot say whether the lease is held: committing could
	// do the work twice, so the run stops (the task is released).
	in, reason = r.fatal(fmt.Errorf("renew task %s before commit: %w", tr.task.ID, err))
	return in, reason, false
}

// endTask fails or releases the current task in its source.
func (r *Runner) endTask(status, reason string, retry bool) {
	tr := r.cur
	if tr == nil {
		return
	}
	// Use a short fresh context: the task's may be cancelled (signal).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cause := context.Cause(tr.ctx)
	// A task taken back (its lease lost, or aborted by pg-loop serve's
	// controller) is cancelled, not failed.
	lost := errors.Is(cause, errLeaseLost) || errors.Is(cause, errLeaseLostBeforeCommit) || errors.Is(cause, ErrAborted) || errors.Is(cause, ErrShutdown)
	var err error
	switch {
	case lost:
		r.res.Cancelled++
	case status == "released":
		r.res.Released++
		err = r.o.Source.Release(ctx, tr.task)
	default:
		r.res.Failed++
		err = r.o.Source.Fail(ctx, tr.task, reason, retry)
	}
	if err != nil {
		r.log("error", "%s task %s: %v", status, tr.task.ID, err)
	}
	r.closeTask(status, reason)
}

func (r *Runner) closeTask(status, reason string) {
	tr := r.cur
	r.o.Events.Emit(&protocol.LoopTaskEvent{Type: protocol.LoopTask, TS: r.now(), Task: tr.task.ID, Title: tr.task.Title, Status: status, Reason: reason, Usage: tr.usage})
	if status != "released" {
		r.remember(MemoryRecord{Type: MemTask, Task: tr.task.ID, Status: status, Reason: reason})
		r.last, r.lastTask = FollowUpBase(tr.conv), tr.task.ID
	}
	tr.cancel(nil)
	r.curMu.Lock()
	r.cur = nil
	r.curMu.Unlock()
	if s := r.o.Session; s != nil {
		if ls, ok := r.o.Source.(*ListSource); ok {
			s.mu.Lock()
			s.Info.Tasks = ls.Snapshot()
			s.mu.Unlock()
		}
		s.mu.Lock()
		s.Info.Task = ""
		s.mu.Unlock()
		r.saveSession()
	}
	if r.o.Team != nil {
		r.updateWorker(func(w *protocol.Worker) { w.LastResult = status; w.Task = "" })
	}
}

func (r *Runner) saveSession() {
	if s := r.o.Session; s != nil {
		if err := s.Save(r.now()); err != nil {
			r.log("error", "save session: %v", err)
		}
	}
}

func (r *Runner) finishSession() {
	s := r.o.Session
	if s == nil {
		return
	}
	s.mu.Lock()
	switch {
	case r.res.Signal:
		s.Info.Status = "interrupted"
	case r.state == Done:
		s.Info.Status = "done"
	default:
		s.Info.Status = "failed"
	}
	s.mu.Unlock()
	r.saveSession()
}

// spend counts a model call's usage.
func (r *Runner) spend(u protocol.Usage) {
	r.usage = r.usage.Add(u)
	r.own = r.own.Add(u)
}

// Worker record and heartbeat.

func (r *Runner) initWorker() {
	pid, start, _ := proc.Self()
	host := proc.ThisHost()
	now := r.now()
	w := &protocol.Worker{Worker: r.o.Worker, PID: pid, PIDStart: start, Host: host.Name, HostID: host.ID, State: string(Idle),
		HeartbeatAt: now, ProgressAt: now, StartedAt: now, Velocity: 1, HeartbeatIntervalMS: r.o.Heartbeat.Milliseconds()}
	if st, err := proc.ReadStat(pid); err == nil {
		w.PGID, w.SID = st.PGID, st.SID // a watcher signals this process only while they match
	}
	if old, err := r.o.Team.Workers().Read(context.Background(), r.o.Worker); err == nil {
		w.Epoch = old.Epoch + 1
		w.Spent = old.Carried() // earlier processes' usage stays counted (a seed of pg-monitor has none of its own)
		if old.PID == pid && old.PIDStart == start && old.Epoch > 0 {
			w.Epoch = old.Epoch // pg-monitor seeded the record of this very process
		}
	}
	if r.o.Session != nil {
		w.Session = r.o.Session.Info.ID
	}
	r.worker = w
	r.writeWorker()
}

// markWorker marks this process as the team's worker before its first
// record names it, and returns what removes the mark as the run ends (a
// signal ends the run through its context, so it runs then too; after a
// SIGKILL the next mark made prunes it).
func (r *Runner) markWorker() func() {
	if r.o.Home == "" {
		return nil
	}
	pid, start, err := proc.Self()
	if err == nil {
		err = workermark.Make(r.o.Home, pid, start, workermark.Mark{Team: r.o.Team.Name(), Worker: r.o.Worker, HostID: proc.ThisHost().ID})
	}
	if err != nil {
		fmt.Fprintf(r.o.Stderr, "pg-loop: warning: %v: no watcher will stop this worker\n", err)
		return nil
	}
	return func() {
		if err := workermark.Remove(r.o.Home, pid, start); err != nil {
			fmt.Fprintf(r.o.Stderr, "pg-loop: warning: %v\n", err)
		}
	}
}

// updateWorker changes the worker record and writes it when something a
// watcher acts on changed (state class, task, pause) or the last write is
// older than workerWriteEvery; the heartbeat writes the rest.
func (r *Runner) updateWorker(f func(w *protocol.Worker)) {
	if r.o.Team == nil {
		return
	}
	r.wmu.Lock()
	before := *r.worker
	f(r.worker)
	w := r.worker
	important := before.Task != w.Task || before.Paused != w.Paused || before.Velocity != w.Velocity ||
		State(w.State).Terminal() || State(before.State).InTask() != State(w.State).InTask()
	due := important || time.Since(r.lastWrite) >= workerWriteEvery
	r.wmu.Unlock()
	if due {
		r.writeWorker()
	}
}

// workerWriteEvery bounds how often progress alone rewrites worker-<n>.json
// (each write is an fsynced atomic replace).
const workerWriteEvery = 200 * time.Millisecond

func (r *Runner) writeWorker() {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.worker.HeartbeatAt = r.now()
	if r.waiting.Load() {
		// Waiting for work is what an idle worker should do, not a stall.
		r.worker.ProgressAt = r.worker.HeartbeatAt
	}
	r.lastWrite = time.Now()
	// A store that does not answer (a database behind a network that
	// drops packets) must not hold the loop: the write gives up, and the
	// next beat tries again.
	ctx, cancel := context.WithTimeout(context.Background(), workerWriteTimeout)
	defer cancel()
	if err := r.o.Team.Workers().Write(ctx, r.worker); err != nil {
		fmt.Fprintf(r.o.Stderr, "pg-loop: worker record: %v\n", err)
	}
}

// workerWriteTimeout bounds one write of the worker record.
const workerWriteTimeout = 10 * time.Second

// heartbeat refreshes heartbeat_at and renews the task's lease.
func (r *Runner) heartbeat(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(r.o.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.writeWorker()
		r.curMu.Lock()
		tr := r.cur
		r.curMu.Unlock()
		if tr == nil || r.o.Lease <= 0 || time.Since(tr.lastRenew) < r.o.Lease/10 {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, r.o.Lease/2)
		err := r.o.Source.Renew(rctx, tr.task)
		cancel()
		switch {
		case err == nil:
			tr.lastRenew = time.Now()
		case errors.Is(err, ErrLeaseLost):
			tr.cancel(errLeaseLost)
		default:
			if ctx.Err() == nil {
				fmt.Fprintf(r.o.Stderr, "pg-loop: renew task %s: %v\n", tr.task.ID, err)
			}
		}
	}
}
