package loop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/shell"
)

// LLM makes model calls. onEvent sees every event of the call as it
// arrives (text deltas, retries, ...); Call returns the end event, or an
// error (a *ModelError for an error event of the model).
type LLM interface {
	Call(ctx context.Context, req *protocol.Request, onEvent func(any)) (*protocol.EndEvent, error)
	Close() error
}

// ModelError is an error event of a model call.
type ModelError struct{ Event protocol.ErrorEvent }

func (e *ModelError) Error() string {
	if e.Event.Kind != "" {
		return fmt.Sprintf("model %s error: %s", e.Event.Kind, e.Event.Message)
	}
	return "model error: " + e.Event.Message
}

// Auth reports an authentication failure, which no retry can fix.
func (e *ModelError) Auth() bool { return e.Event.Kind == protocol.KindAuth }

// NoModel reports a model the provider does not have (HTTP 404, e.g. an
// Ollama model never pulled): every task would fail the same way.
func (e *ModelError) NoModel() bool { return e.Event.Status == 404 }

// Unrecoverable reports a model failure that ends the run, not the task.
func (e *ModelError) Unrecoverable() bool { return e.Auth() || e.NoModel() }

// DiedError is a coprocess that stopped while requests were out (killed,
// out of memory, crashed): what it did with them is unknown. The next
// request starts a fresh one.
type DiedError struct {
	Kind    string // "model" or "tools"
	Cmdline string
	Err     error // how it ended
}

func (e *DiedError) Error() string {
	return fmt.Sprintf("%s coprocess %q stopped: %v", e.Kind, e.Cmdline, e.Err)
}

func (e *DiedError) Unwrap() error { return e.Err }

// shellCommand runs cmd through sh, so components are given as shell
// command lines ('pg-llm serve', 'python3 my-model.py'); args follow as
// "$@". A line of plain words naming a program on PATH (pg-loop's own
// defaults) runs directly, as sh would run it but without the sh: one
// process less per component call, and a coprocess that is pg-loop's own
// child. env is the command's environment (nil: this process's).
//
// The command leads a process group of its own; cancelling ctx kills the
// group, but only until the command is reaped (proc.Child): call its
// Start and Wait.
func shellCommand(ctx context.Context, env []string, cmd string, args ...string) *proc.Child {
	var c *exec.Cmd
	if words, ok := shell.Words(cmd); ok {
		if path, ok := program(words[0], env); ok {
			c = exec.CommandContext(ctx, path, append(words[1:], args...)...)
			c.Args[0] = words[0] // as sh passes it
		}
	}
	if c == nil {
		c = exec.CommandContext(ctx, "sh", append([]string{"-c", cmd + ` "$@"`, "sh"}, args...)...)
	}
	c.Env = env
	pc := proc.Command(c)
	pc.WaitDelay = 2 * time.Second
	return pc
}

// program finds name as sh would on the PATH of env: an absolute path
// that is an executable file, or the first such file in a PATH directory.
// It reports false whenever sh's rules could give another answer (a
// relative path, an empty or relative PATH entry before a match): the
// line then runs with sh.
func program(name string, env []string) (string, bool) {
	if strings.Contains(name, "/") {
		return name, filepath.IsAbs(name) && executable(name)
	}
	path := os.Getenv("PATH")
	if env != nil {
		path = ""
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				path = v
			}
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			return "", false
		}
		if p := filepath.Join(dir, name); executable(p) {
			return p, true
		}
	}
	return "", false
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && unix.Access(p, unix.X_OK) == nil
}

// coprocess is a long-lived child speaking JSON Lines: requests on its
// stdin, replies tagged with an id on its stdout.
type coprocess struct {
	cmdline string
	stderr  io.Writer
	kind    string // "model" or "tools", for errors
	dir     string
	env     []string // nil: this process's

	mu      sync.Mutex
	cmd     *proc.Child
	in      io.WriteCloser
	waiters map[string]*waiter
	dead    chan struct{}
	deadErr error
	starts  int  // how many children were started: a new one knows nothing of the last
	closed  bool // Close was called since the last request: no prestart
	used    protocol.ProcessUsage
}

func newCoprocess(kind, cmdline string, stderr io.Writer) *coprocess {
	return &coprocess{kind: kind, cmdline: cmdline, stderr: stderr}
}

// start launches the child if it is not running. Called with mu held.
func (c *coprocess) start() error {
	if c.cmd != nil {
		select {
		case <-c.dead:
			c.cmd = nil // it died: start a new one
		default:
			return nil
		}
	}
	env := c.env
	if env == nil {
		env = os.Environ()
	}
	cmd := shellCommand(context.Background(), append(slices.Clip(env), proc.EnvTied+"=1"), c.cmdline)
	// A coprocess must not outlive pg-loop, even killed by SIGKILL
	// (PR_SET_PDEATHSIG); what it leaves in its group ends with it.
	cmd.Tied = true
	cmd.EndGroup = true
	cmd.Dir = c.dir
	cmd.Stderr = c.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s coprocess %q: %w", c.kind, c.cmdline, err)
	}
	c.cmd, c.in = cmd, in
	c.starts++
	c.waiters = map[string]*waiter{}
	c.dead = make(chan struct{})
	go c.read(cmd, out, c.dead)
	return nil
}

// prestart starts the child ahead of the first request, so that it has
// started by the time that request comes (pg-loop starts its coprocesses
// while it loads its tasks). A failure is left for that request to meet.
//
// In the background, the start waits for a processor: pg-loop runs on one
// (cli.Spec.Waits), which its main goroutine holds until it blocks, and a
// goroutine blocked in fork and exec holds it until the runtime takes it
// back, a tick later. So the model, which the first request waits for, is
// started at once (a fork and exec: well under a millisecond of this
// process's time), and the tools in the background: they run while the
// first request is out.
func (c *coprocess) prestart(background bool) {
	start := func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.closed {
			_ = c.start()
		}
	}
	if background {
		go start()
	} else {
		start()
	}
}

// read routes reply lines to their waiters by id until the child's stdout closes.
func (c *coprocess) read(cmd *proc.Child, out io.Reader, dead chan struct{}) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var head struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(line, &head) != nil {
			fmt.Fprintf(c.stderr, "pg-loop: %s coprocess wrote a line that is not JSON: %.200s\n", c.kind, line)
			continue
		}
		id := idString(head.ID)
		c.mu.Lock()
		w := c.waiters[id]
		c.mu.Unlock()
		if w == nil {
			continue // a reply nobody waits for (e.g. a cancelled request)
		}
		select {
		case w.ch <- append([]byte(nil), line...):
		case <-w.gone:
		}
	}
	err := sc.Err()
	werr := cmd.Wait()
	if err == nil {
		err = werr
	}
	if err == nil {
		err = errors.New("exited")
	}
	c.mu.Lock()
	c.account(cmd.ProcessState)
	c.deadErr = &DiedError{Kind: c.kind, Cmdline: c.cmdline, Err: err}
	c.mu.Unlock()
	close(dead)
}

// account adds what a child that exited used (with its own children) to
// the component's usage. Called with mu held.
func (c *coprocess) account(ps *os.ProcessState) {
	if ps == nil {
		return
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return
	}
	c.used.Component = c.kind
	c.used.Processes++
	c.used.UserMS += timevalMS(ru.Utime)
	c.used.SysMS += timevalMS(ru.Stime)
	c.used.MaxRSSKB = max(c.used.MaxRSSKB, ru.Maxrss) // KiB on Linux
}

func timevalMS(tv syscall.Timeval) float64 {
	return float64(tv.Sec)*1e3 + float64(tv.Usec)/1e3
}

// usage is what the children that exited used (ok: there was one).
func (c *coprocess) usage() (protocol.ProcessUsage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, c.used.Processes > 0
}

func idString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

type waiter struct {
	ch   chan []byte
	gone chan struct{}
}

// send writes one request line and registers a waiter for its replies.
// line gets the number of the child it will go to (coprocess.starts) and
// returns the line to send.
func (c *coprocess) send(id string, line func(child int) ([]byte, error)) (chan []byte, chan struct{}, error) {
	ch, dead, werr, err := c.sendLocked(id, line)
	if werr != nil {
		// A child that exited leaves a broken pipe: how it ended says
		// more (a missing program, its exit status).
		select {
		case <-dead:
			return nil, nil, c.err()
		case <-time.After(time.Second):
			return nil, nil, fmt.Errorf("write to %s coprocess: %w", c.kind, werr)
		}
	}
	return ch, dead, err
}

// sendLocked is send under mu; a failed write is werr, with the child's
// dead channel.
func (c *coprocess) sendLocked(id string, line func(child int) ([]byte, error)) (ch chan []byte, dead chan struct{}, werr, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = false
	if err := c.start(); err != nil {
		return nil, nil, nil, err
	}
	b, err := line(c.starts)
	if err != nil {
		return nil, nil, nil, err
	}
	w := &waiter{ch: make(chan []byte, 64), gone: make(chan struct{})}
	c.waiters[id] = w
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		delete(c.waiters, id)
		return nil, c.dead, err, nil
	}
	return w.ch, c.dead, nil, nil
}

// ask sends a request that gets one reply line (a list of tools or
// models) and waits for that reply.
func (c *coprocess) ask(ctx context.Context, id string, req any) ([]byte, error) {
	line, err := marshalLine(req)
	if err != nil {
		return nil, err
	}
	ch, dead, err := c.send(id, func(int) ([]byte, error) { return line, nil })
	if err != nil {
		return nil, err
	}
	defer c.forget(id)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case reply := <-ch:
		return reply, nil
	case <-dead:
		select {
		case reply := <-ch:
			return reply, nil
		default:
			return nil, c.err()
		}
	}
}

func (c *coprocess) forget(id string) {
	c.mu.Lock()
	if w := c.waiters[id]; w != nil {
		close(w.gone)
		delete(c.waiters, id)
	}
	c.mu.Unlock()
}

func (c *coprocess) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadErr
}

// Close ends the child: stdin closes, which ends an idle server at once.
// One still busy after 200 ms (a model call that hangs, a call the loop
// gave up on) gets SIGTERM to its group, and SIGKILL 2 s after the close,
// so pg-loop stops promptly when it is told to.
func (c *coprocess) Close() error {
	c.mu.Lock()
	cmd, in, dead := c.cmd, c.in, c.dead
	c.cmd = nil
	c.closed = true
	c.mu.Unlock()
	if cmd == nil {
		return nil
	}
	in.Close()
	kill := time.After(2 * time.Second)
	select {
	case <-dead:
		return nil
	case <-time.After(200 * time.Millisecond):
		_, _ = cmd.SignalGroup(syscall.SIGTERM)
	}
	select {
	case <-dead:
	case <-kill:
		_, _ = cmd.SignalGroup(syscall.SIGKILL)
		<-dead
	}
	return nil
}

var reqSeq struct {
	sync.Mutex
	n int
}

func nextID(prefix string) string {
	reqSeq.Lock()
	defer reqSeq.Unlock()
	reqSeq.n++
	return prefix + strconv.Itoa(reqSeq.n)
}

// ServeLLM talks to `pg-llm serve` (or anything speaking its protocol).
//
// When the server holds the conversation it answered (its end event names
// it, docs/protocol.md "Held conversations"), the next request that
// extends that conversation sends only the new messages. Anything that
// does not say so gets whole requests, and so does a request that does
// not extend the held conversation (a compacted or fresh context).
type ServeLLM struct {
	co *coprocess

	mu     sync.Mutex
	calls  int                // calls in flight
	held   string             // the name of the conversation the server holds, "" for none
	heldBy int                // the child that holds it (coprocess.starts)
	msgs   []protocol.Message // that conversation
	system string             // its system prompt
	tools  []protocol.ToolDef // and tools
}

// NewServeLLM returns a model component running cmdline as a coprocess,
// started at the first call and restarted if it dies.
func NewServeLLM(cmdline string, stderr io.Writer) *ServeLLM {
	return &ServeLLM{co: newCoprocess("model", cmdline, stderr)}
}

// Call sends the request with a fresh id and collects its events.
func (l *ServeLLM) Call(ctx context.Context, req *protocol.Request, onEvent func(any)) (*protocol.EndEvent, error) {
	end, err := l.call(ctx, req, onEvent, true)
	var me *ModelError
	if errors.As(err, &me) && me.Event.Kind == protocol.KindNotHeld {
		end, err = l.call(ctx, req, onEvent, false) // the server forgot: the whole request
	}
	return end, err
}

func (l *ServeLLM) call(ctx context.Context, req *protocol.Request, onEvent func(any), continued bool) (*protocol.EndEvent, error) {
	l.mu.Lock()
	l.calls++
	alone := l.calls == 1 // a continuation is only certain with one call at a time
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.calls--
		l.mu.Unlock()
	}()
	r := *req
	r.ID = nextID("r")
	sentTo := 0
	ch, dead, err := l.co.send(r.ID, func(child int) ([]byte, error) {
		sentTo = child
		r.After, r.Messages, r.System, r.Tools = "", req.Messages, req.System, req.Tools
		// A continuation leaves out the system prompt and the tools, which
		// are the held ones; a request with others goes whole.
		if continued && alone && l.sameSetup(req) {
			if after, rest, ok := l.continues(child, req.Messages); ok {
				r.After, r.Messages, r.System, r.Tools = after, rest, "", nil
			}
		}
		return marshalLine(&r)
	})
	if err != nil {
		return nil, err
	}
	defer l.co.forget(r.ID)
	if r.After != "" && onEvent != nil {
		// A server that forgot the conversation is asked again with the
		// whole request: its not_held error is nobody else's business.
		shown := onEvent
		onEvent = func(ev any) {
			if e, ok := ev.(*protocol.ErrorEvent); ok && e.Kind == protocol.KindNotHeld {
				return
			}
			shown(ev)
		}
	}
	end, err := l.await(ctx, ch, dead, onEvent)
	if alone {
		l.remember(sentTo, req, r.After != "", r.Messages, end)
	}
	return end, err
}

// continues returns the held conversation msgs extend, and what follows it.
func (l *ServeLLM) continues(child int, msgs []protocol.Message) (string, []protocol.Message, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == "" || l.heldBy != child || len(msgs) < len(l.msgs) {
		return "", nil, false
	}
	for i := range l.msgs {
		if !l.msgs[i].Equal(&msgs[i]) {
			return "", nil, false
		}
	}
	return l.held, msgs[len(l.msgs):], true
}

// sameSetup reports whether a request has the system prompt and the tools
// of the held conversation.
func (l *ServeLLM) sameSetup(req *protocol.Request) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if req.System != l.system || len(req.Tools) != len(l.tools) {
		return false
	}
	for i := range req.Tools {
		a, b := &req.Tools[i], &l.tools[i]
		if a.Name != b.Name || a.Description != b.Description || !bytes.Equal(a.InputSchema, b.InputSchema) {
			return false
		}
	}
	return true
}

// remember notes the conversation the server holds after a call: the
// request's messages and the answer, with its system prompt and tools,
// when the end event names it. A request that continued the held
// conversation (after) sent only what follows it: the held messages,
// which are ours, are extended by those and the answer, not copied again
// with them at every step.
func (l *ServeLLM) remember(child int, req *protocol.Request, after bool, sent []protocol.Message, end *protocol.EndEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := l.msgs
	l.held, l.msgs, l.system, l.tools = "", nil, "", nil
	if end == nil || end.Held == "" {
		return
	}
	l.held, l.heldBy = end.Held, child
	if after {
		l.msgs = append(append(held, sent...), end.Message)
	} else {
		l.msgs = append(req.Messages[:len(req.Messages):len(req.Messages)], end.Message)
	}
	l.system, l.tools = req.System, req.Tools
}

// await collects the events of one request until its end or error.
func (l *ServeLLM) await(ctx context.Context, ch chan []byte, dead chan struct{}, onEvent func(any)) (*protocol.EndEvent, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case line := <-ch:
			end, done, err := handleModelLine(line, onEvent)
			if done {
				return end, err
			}
		case <-dead:
			// Drain what arrived before the child died.
			for {
				select {
				case line := <-ch:
					if end, done, err := handleModelLine(line, onEvent); done {
						return end, err
					}
				default:
					return nil, l.co.err()
				}
			}
		}
	}
}

// modelTableWait bounds the wait for the model table: pg-llm serve
// answers at once, and a component in its place that ignores the request
// must not hold the run at load_tasks for ever.
var modelTableWait = 10 * time.Second

// Models asks the coprocess for its model table (a model-list-request,
// docs/protocol.md), starting it: only pg-llm serve answers one.
func (l *ServeLLM) Models(ctx context.Context) ([]ModelInfo, error) {
	id := nextID("m")
	wait, cancel := context.WithTimeout(ctx, modelTableWait)
	defer cancel()
	reply, err := l.co.ask(wait, id, protocol.ModelListRequest{Type: "models", ID: id})
	if err != nil {
		if ctx.Err() == nil && wait.Err() != nil {
			return nil, fmt.Errorf("model table: %q did not answer a model-list request within %v", l.co.cmdline, modelTableWait)
		}
		return nil, fmt.Errorf("model table: %w", err)
	}
	ev, err := protocol.ModelEvents.Decode(reply)
	if err != nil {
		return nil, fmt.Errorf("model table from %q: %w", l.co.cmdline, err)
	}
	switch e := ev.(type) {
	case *protocol.ModelsEvent:
		return e.Models, nil
	case *protocol.ErrorEvent:
		return nil, fmt.Errorf("model table from %q: %s", l.co.cmdline, e.Message)
	}
	return nil, fmt.Errorf("model table from %q: unexpected %.200s record", l.co.cmdline, reply)
}

// Start starts the coprocess now (see prestart).
func (l *ServeLLM) Start() { l.co.prestart(false) }

// Close stops the coprocess.
func (l *ServeLLM) Close() error { return l.co.Close() }

// Usage is what the coprocesses that exited used (see ProcessUsage).
func (l *ServeLLM) Usage() (protocol.ProcessUsage, bool) { return l.co.usage() }

// handleModelLine decodes one model event; done is set on end or error.
func handleModelLine(line []byte, onEvent func(any)) (*protocol.EndEvent, bool, error) {
	ev, err := protocol.ModelEvents.Decode(line)
	if err != nil {
		return nil, true, fmt.Errorf("model component: %w", err)
	}
	if onEvent != nil {
		onEvent(ev)
	}
	switch e := ev.(type) {
	case *protocol.EndEvent:
		// Negative or NaN usage would evade the budgets: the component
		// is broken.
		if err := e.Usage.Check(); err != nil {
			return nil, true, fmt.Errorf("model component: end: usage: %w", err)
		}
		return e, true, nil
	case *protocol.ErrorEvent:
		return nil, true, &ModelError{Event: *e}
	}
	return nil, false, nil
}

// CommandLLM runs a command per call: the request on stdin, events on stdout.
type CommandLLM struct {
	Cmdline string
	Dir     string
	Stderr  io.Writer
}

// Call runs the command once.
func (l *CommandLLM) Call(ctx context.Context, req *protocol.Request, onEvent func(any)) (*protocol.EndEvent, error) {
	body, err := marshalLine(req)
	if err != nil {
		return nil, err
	}
	cmd := shellCommand(ctx, nil, l.Cmdline)
	cmd.Dir = l.Dir
	cmd.Stdin = bytes.NewReader(body)
	cmd.Stderr = l.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start model command %q: %w", l.Cmdline, err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var end *protocol.EndEvent
	var callErr error
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || end != nil || callErr != nil {
			continue
		}
		e, done, err := handleModelLine(line, onEvent)
		if done {
			end, callErr = e, err
		}
	}
	werr := cmd.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if callErr != nil || end != nil {
		return end, callErr
	}
	if werr != nil {
		return nil, fmt.Errorf("model command %q (run in %s): %w", l.Cmdline, l.Dir, werr)
	}
	return nil, protocol.ErrNoEnd
}

// Close does nothing: nothing outlives a call.
func (l *CommandLLM) Close() error { return nil }

// SiblingCommand is the command line of a sibling tool: the binary next to
// the running executable when it exists, else the name (found on PATH).
func SiblingCommand(name, args string) string {
	if exe, err := os.Executable(); err == nil {
		p := exe[:len(exe)-len(baseName(exe))] + name
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return shell.Quote(p) + " " + args
		}
	}
	return name + " " + args
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// marshalLine encodes v without HTML escaping and without the newline.
func marshalLine(v any) ([]byte, error) {
	b, err := jsonl.Marshal(v)
	if err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b, []byte("\n")), nil
}
