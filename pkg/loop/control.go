package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// Control is pg-loop serve's handle on one run: it is the run's task
// source (prompt and follow_up make tasks), its approver (approve and
// deny), and it keeps the steer messages for the next model call. One
// session: every task follows up on the conversation before it.
type Control struct {
	// gate keeps a new task from starting between a prompt's queueing and
	// its reply; mu guards the rest.
	gate    sync.Mutex
	mu      sync.Mutex
	wake    chan struct{}
	queue   []protocol.Task
	dropped []protocol.Task // queued tasks a shutdown cancelled, for the runner to report
	next    int             // number of the next task-N
	busy    bool            // a task is running
	closed  bool            // no more tasks: shutdown, or the end of the commands
	steers  []string
	pending map[string]*pendingApproval
	order   []string // pending calls, oldest first
	noMore  bool     // nobody will answer approvals any more (the commands ended)
	over    bool     // the run has ended: its last line is out, no reply may follow (guarded by gate)
	runner  *Runner
	verify  string // the run's --verify, for tasks without their own

	// what the events said last, for the state command
	state   string
	task    string
	step    int
	usage   protocol.Usage
	session string
}

type pendingApproval struct {
	ev     protocol.LoopApprovalEvent
	answer chan approvalAnswer
}

type approvalAnswer struct {
	ok     bool
	reason string
}

// Errors a task ends with when serve cancels it.
var (
	ErrAborted  = errors.New("aborted")
	ErrShutdown = errors.New("shut down")
)

// NewControl makes the handle; used holds task ids a resumed session
// already has, so new tasks get numbers of their own.
func NewControl(used map[string]bool) *Control {
	c := &Control{wake: make(chan struct{}, 1), pending: map[string]*pendingApproval{}, next: 1, state: string(Idle)}
	for id := range used {
		if n, ok := taskNumber(id); ok && n >= c.next {
			c.next = n + 1
		}
	}
	return c
}

// Attach binds the control to its runner (abort) and watches the run's
// events (state): call it before the run starts.
func (c *Control) Attach(r *Runner) {
	c.mu.Lock()
	c.runner = r
	c.verify = r.o.Verify
	if r.o.Session != nil {
		c.session = r.o.Session.Info.ID
	}
	c.mu.Unlock()
	r.o.Events.Observe(c.observe)
}

func (c *Control) observe(ev any) {
	if _, ok := ev.(*protocol.LoopSummaryEvent); ok {
		c.Over() // the run's last records follow: no reply after them
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e := ev.(type) {
	case *protocol.LoopStateEvent:
		c.state, c.task, c.step = e.To, e.Task, e.Step
	case *protocol.LoopAssistantEvent:
		c.usage = e.Total
	case *protocol.LoopTaskEvent:
		if e.Status != "started" {
			c.busy = false // ended, however: done, failed, released or cancelled
			c.signal()
		}
	}
}

func (c *Control) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Next waits for a prompt or a follow-up; nil once shut down or the
// commands ended with nothing left to do. Steer messages that came too
// late for the task they were meant for become a follow-up.
func (c *Control) Next(ctx context.Context) (*protocol.Task, error) {
	for {
		c.gate.Lock()
		c.mu.Lock()
		if len(c.queue) == 0 && len(c.steers) > 0 && !c.closed {
			c.queue = append(c.queue, c.newTask(strings.Join(c.steers, "\n\n"), ""))
			c.steers = nil
		}
		if len(c.queue) > 0 {
			t := c.queue[0]
			c.queue = c.queue[1:]
			c.busy = true
			c.mu.Unlock()
			c.gate.Unlock()
			return &t, nil
		}
		closed := c.closed
		c.mu.Unlock()
		c.gate.Unlock()
		if closed {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.wake:
		}
	}
}

// newTask makes a task; every task of the session follows up on the
// conversation before it. Call with mu held.
func (c *Control) newTask(message, verify string) protocol.Task {
	id := "task-" + strconv.Itoa(c.next)
	c.next++
	return NewTask(TaskInput{ID: id, Prompt: message, Verify: verify, Labels: map[string]string{LabelFollowUp: "true"}}, time.Now().UTC())
}

func (c *Control) ended() {
	c.mu.Lock()
	c.busy = false
	c.mu.Unlock()
	c.signal()
}

// Complete, Fail, Release and Renew end a task: serve has no queue to tell.
func (c *Control) Complete(context.Context, *protocol.Task, json.RawMessage) error {
	c.ended()
	return nil
}

func (c *Control) Fail(context.Context, *protocol.Task, string, bool) error {
	c.ended()
	return nil
}

func (c *Control) Release(context.Context, *protocol.Task) error {
	c.ended()
	return nil
}

func (c *Control) Renew(context.Context, *protocol.Task) error { return nil }

// Wait is the approver of serve mode: the call is registered first, so
// that an approve or deny sent the moment the pending event (emit) is
// read finds it, and then waits for the answer by its id.
func (c *Control) Wait(ctx context.Context, ev protocol.LoopApprovalEvent, emit func()) (bool, string, error) {
	c.mu.Lock()
	if c.noMore {
		c.mu.Unlock()
		emit()
		return false, "the commands ended (stdin closed): nobody can approve it", nil
	}
	p := &pendingApproval{ev: ev, answer: make(chan approvalAnswer, 1)}
	c.pending[ev.Call.ID] = p
	c.order = append(c.order, ev.Call.ID)
	c.mu.Unlock()
	defer c.forget(ev.Call.ID)
	emit()
	select {
	case a := <-p.answer:
		return a.ok, a.reason, nil
	case <-ctx.Done():
		return false, "", context.Cause(ctx)
	}
}

func (c *Control) forget(call string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, call)
	for i, id := range c.order {
		if id == call {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
}

// Do carries out one command: it returns the reply, and what to do once
// the reply is out (so that a command's reply comes before the events it
// causes: the task's start, the approved call's run, the abort).
func (c *Control) Do(cmd protocol.ServeCommand, now time.Time) (protocol.ServeReply, func()) {
	rep := protocol.ServeReply{Type: protocol.LoopReply, TS: now, ID: cmd.ID, Command: cmd.Type, OK: true}
	after, err := c.do(cmd, &rep)
	if err != nil {
		rep.OK, rep.Error = false, err.Error()
	}
	if after == nil {
		after = func() {}
	}
	return rep, after
}

func (c *Control) do(cmd protocol.ServeCommand, rep *protocol.ServeReply) (after func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	needsMessage := func() error {
		if strings.TrimSpace(cmd.Message) == "" {
			return fmt.Errorf("%s needs a message", cmd.Type)
		}
		return nil
	}
	switch cmd.Type {
	case protocol.CmdPrompt, protocol.CmdFollowUp:
		if err := needsMessage(); err != nil {
			return nil, err
		}
		if c.closed {
			return nil, errors.New("the session is shutting down")
		}
		if cmd.Type == protocol.CmdPrompt && (c.busy || len(c.queue) > 0) {
			return nil, errors.New("a task is running: send steer to change its course, or follow_up to queue a task for after it")
		}
		t := c.newTask(cmd.Message, cmd.Verify)
		c.queue = append(c.queue, t)
		rep.Task = t.ID
		return c.signal, nil
	case protocol.CmdSteer:
		if err := needsMessage(); err != nil {
			return nil, err
		}
		if !c.busy {
			return nil, errors.New("no task is running: send prompt")
		}
		c.steers = append(c.steers, cmd.Message)
	case protocol.CmdAbort:
		if !c.busy || c.runner == nil {
			return nil, errors.New("no task is running")
		}
		r := c.runner
		rep.Task = c.task
		return func() { r.abortTask(ErrAborted) }, nil
	case protocol.CmdApprove, protocol.CmdDeny:
		p, ok := c.pending[cmd.Call]
		if !ok {
			return nil, fmt.Errorf("no call %q waits for approval (waiting: %s)", cmd.Call, orNone(c.order))
		}
		delete(c.pending, cmd.Call)
		rep.Task = p.ev.Task
		a := approvalAnswer{ok: cmd.Type == protocol.CmdApprove, reason: cmd.Reason}
		return func() { p.answer <- a }, nil
	case protocol.CmdState:
		rep.State = c.snapshot()
	case protocol.CmdShutdown:
		c.closed = true
		// Queued tasks were accepted (their prompt got a reply with their
		// id): they end cancelled, each with a task event, not silently.
		c.dropped = append(c.dropped, c.queue...)
		c.queue, c.steers = nil, nil
		r, busy := c.runner, c.busy
		return func() {
			if busy && r != nil {
				r.abortTask(ErrShutdown)
			}
			c.signal()
		}, nil
	case "":
		return nil, errors.New(`missing field "type" (prompt, follow_up, steer, abort, approve, deny, state or shutdown)`)
	default:
		return nil, fmt.Errorf("unknown command %q (known: prompt, follow_up, steer, abort, approve, deny, state, shutdown)", cmd.Type)
	}
	return nil, nil
}

func orNone(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// snapshot is the state record. Call with mu held.
func (c *Control) snapshot() *protocol.ServeState {
	st := &protocol.ServeState{Session: c.session, State: c.state, Busy: c.busy, Step: c.step, Queued: len(c.queue), Steering: len(c.steers), Usage: c.usage, Approvals: []protocol.LoopApprovalEvent{}}
	if c.busy {
		st.Task = c.task
	}
	for _, id := range c.order {
		if p, ok := c.pending[id]; ok {
			st.Approvals = append(st.Approvals, p.ev)
		}
	}
	return st
}

// Over marks the run ended, before its summary and end marker are
// written: a command read later gets no reply, so the marker stays the
// last line.
func (c *Control) Over() {
	c.gate.Lock()
	c.over = true
	c.gate.Unlock()
}

// EndOfCommands is the end of stdin: queued work still runs, but nothing
// new can come and no approval can be answered any more.
func (c *Control) EndOfCommands() {
	c.mu.Lock()
	c.closed, c.noMore = true, true
	for id, p := range c.pending {
		p.answer <- approvalAnswer{reason: "the commands ended (stdin closed): nobody can approve it"}
		delete(c.pending, id)
	}
	c.mu.Unlock()
	c.signal()
}

// cancelQueued ends the tasks a shutdown took off the queue before they
// started: each is cancelled, with a task event, in the session's memory
// and in the summary's count.
func (r *Runner) cancelQueued() {
	c := r.o.Control
	if c == nil {
		return
	}
	c.mu.Lock()
	dropped := c.dropped
	c.dropped = nil
	c.mu.Unlock()
	const reason = "shut down before it started"
	for _, t := range dropped {
		r.res.Cancelled++
		r.remember(MemoryRecord{Type: MemTask, Task: t.ID, Status: protocol.StatusCancelled, Reason: reason, TaskRec: &t})
		r.o.Events.Emit(&protocol.LoopTaskEvent{Type: protocol.LoopTask, TS: r.now(), Task: t.ID, Title: t.Title, Status: protocol.StatusCancelled, Reason: reason, Usage: protocol.Usage{}})
	}
}

// abortTask cancels the task in progress with cause. Serve calls it while
// a task is busy: one that Next has handed out but the runner has not made
// current yet is cancelled as it starts.
func (r *Runner) abortTask(cause error) {
	r.curMu.Lock()
	defer r.curMu.Unlock()
	if r.cur == nil {
		r.abortNext = cause
		return
	}
	r.cur.cancel(cause)
}

// steer adds the steer messages that came since the last model call to
// the conversation, before the next one.
func (r *Runner) steer(tr *taskRun) {
	if r.o.Control == nil {
		return
	}
	r.o.Control.mu.Lock()
	msgs := r.o.Control.steers
	r.o.Control.steers = nil
	r.o.Control.mu.Unlock()
	for _, m := range msgs {
		r.addMessage(r.userMessage(m), nil)
		r.log("info", "steered: %s", termtext.OneLine(m, 120))
	}
}

// Commands reads serve commands from in, one JSON object a line, carries
// each out and emits its reply; a malformed line gets an error record
// naming it, and reading goes on. At the end of in, queued work still
// runs (see EndOfCommands). Its replies are written when it returns.
func (c *Control) Commands(in io.Reader, ev *Emitter, now func() time.Time) error {
	defer ev.Flush() // an error is the run's Err
	defer c.EndOfCommands()
	dec := jsonl.NewDecoder(in, "stdin")
	for {
		line, err := dec.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read commands: %w", err)
		}
		var cmd protocol.ServeCommand
		if err := jsonl.Unmarshal(line, &cmd, true); err != nil {
			ev.Emit(protocol.ErrorEvent{Type: protocol.EventError, Tool: "pg-loop", Kind: "bad_input", Line: dec.Line(),
				Message: fmt.Sprintf("line %d: %v (want {\"type\":\"prompt\",\"id\":\"1\",\"message\":\"...\"})", dec.Line(), err)})
			continue
		}
		c.gate.Lock()
		if c.over {
			c.gate.Unlock()
			return nil
		}
		rep, after := c.Do(cmd, now().UTC())
		ev.Emit(&rep)
		c.gate.Unlock()
		after()
	}
}
