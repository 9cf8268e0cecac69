package remote

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
)

// Bounds on what one connection makes the agent hold, which every
// command of the host shares (a stuck or buggy client must not pin it):
//   - maxLine caps one request line. An add of many tasks is one line:
//     32 MiB holds some 30,000 tasks of a kilobyte; the agent hangs up
//     on a longer line.
//   - maxInflight calls run at once; past it the agent reads no more of
//     the connection until one answers (the client's writes then wait).
//   - writeTimeout: a client that reads no answer for that long is gone;
//     its connection is closed and its calls end.
const (
	maxLine     = 32 << 20
	maxInflight = 64
)

var writeTimeout = 30 * time.Second

// Serve answers the requests of one connection with st until the client
// closes it. Each request runs in a goroutine of its own, so a wait_claim
// does not hold up the calls behind it.
//
// When ctx ends (the agent is told to stop), the calls in flight finish:
// a short call as it would have, a waiting one (wait_claim, follow_next)
// stopped, with what it had done by then (a task it claimed) or else the
// error kind stopping, which tells the client that nothing happened and to
// run the call elsewhere, as each request read after gets. Then it writes
// its last line, a response of id 0 with the error kind stopping: every
// request it has not answered by then it did not run, and never will.
// Then Serve closes conn (when it is an io.Closer) and returns.
func Serve(ctx context.Context, conn io.ReadWriter, st store.Store) error {
	// sctx ends with the connection: the calls of a client gone stop.
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	defer scancel()
	s := &session{st: st, conn: conn, enc: jsonl.NewEncoder(conn), teams: map[string]store.Team{},
		calls: map[int64]*call{}, followers: map[int64]store.Follower{}, slots: make(chan struct{}, maxInflight)}
	defer s.closeFollowers()
	if err := s.write(protocol.StoreAgentHello{Type: "hello", Protocol: protocol.StoreAgentProtocol, Store: st.Kind(), PID: os.Getpid()}); err != nil {
		return err
	}
	// On stop: no new call starts; once those in flight have answered,
	// the connection closes, which ends the read loop.
	closed := make(chan struct{})
	defer close(closed)
	stopDone := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(stopDone)
		s.mu.Lock()
		s.stopping = true
		for _, c := range s.calls {
			if c.waits {
				c.byAgent = true
				c.cancel()
			}
		}
		s.mu.Unlock()
		s.inflight.Wait()
		// Every request read by now has answered, and none read from now
		// on runs: the last line says so, so that the client runs what it
		// sent and has no answer to elsewhere, knowing it did nothing.
		s.write(protocol.StoreAgentResponse{Error: stoppingError()})
		if testHookStopped != nil {
			testHookStopped()
		}
		if c, ok := conn.(io.Closer); ok {
			select {
			case <-closed:
			default:
				c.Close()
			}
		}
	})
	// A stop under way is waited for: it writes to conn and calls the
	// test hook, and outlived Serve before (a race in the tests).
	defer func() {
		if !stop() {
			<-stopDone
		}
	}()
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	defer func() {
		scancel()
		s.inflight.Wait()
	}()
	for sc.Scan() {
		var req protocol.StoreAgentRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("store agent: bad request: %w", err)
		}
		if testHookRead != nil {
			testHookRead(&req)
		}
		if req.Op == "cancel" {
			s.cancel(req.ID)
			continue
		}
		// A slot first: with maxInflight calls running, nothing more is
		// read until one answers.
		select {
		case s.slots <- struct{}{}:
		case <-sctx.Done():
			return nil // the client is gone
		}
		cl := &call{waits: req.Op == "wait_claim" || req.Op == "follow_next"}
		var cctx context.Context
		cctx, cl.cancel = context.WithCancel(sctx)
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			<-s.slots
			cl.cancel()
			if err := s.write(protocol.StoreAgentResponse{ID: req.ID, Error: stoppingError()}); err != nil {
				return err
			}
			continue
		}
		if s.calls[req.ID] != nil {
			// A second call under the id of one in flight could no
			// longer be cancelled, nor the first: refused, not run.
			s.mu.Unlock()
			<-s.slots
			cl.cancel()
			if err := s.write(protocol.StoreAgentResponse{ID: req.ID, Error: encodeError(&Error{Msg: fmt.Sprintf("request id %d is already in flight", req.ID), Bad: true})}); err != nil {
				return err
			}
			continue
		}
		s.calls[req.ID] = cl
		s.inflight.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.inflight.Done()
			defer func() { <-s.slots }()
			res, err := s.handle(cctx, &req)
			s.mu.Lock()
			delete(s.calls, req.ID)
			byAgent := cl.byAgent && !cl.byClient
			s.mu.Unlock()
			cl.cancel()
			resp := protocol.StoreAgentResponse{ID: req.ID, Error: encodeError(err)}
			if byAgent && errors.Is(err, context.Canceled) {
				// A wait stopped by the agent's stop, not by the client,
				// having claimed nothing.
				resp.Error = stoppingError()
			}
			if err == nil && res != nil {
				resp.Result, err = marshalResult(res)
				resp.Error = encodeError(err)
			}
			if s.write(resp) != nil {
				scancel() // the client is gone
				s.hangUp()
			}
		}()
	}
	return sc.Err()
}

// Test hooks: testHookRead sees each request as it is read, before
// anything is decided about it; testHookStopped runs once a stopping
// session has said its last line, before it hangs up.
var testHookRead func(*protocol.StoreAgentRequest)
var testHookStopped func()

// call is a request in flight.
type call struct {
	cancel   context.CancelFunc
	waits    bool // wait_claim, follow_next: stopped when the agent stops
	byClient bool // the client cancelled it
	byAgent  bool // the agent's stop cancelled it
}

// stoppingError tells the client that the agent is stopping and did not
// run the call (or stopped a wait before it did anything).
func stoppingError() *protocol.StoreAgentError {
	return &protocol.StoreAgentError{Kind: "stopping", Message: "store agent: stopping"}
}

// session is one connection's state.
type session struct {
	st    store.Store
	conn  io.ReadWriter
	wmu   sync.Mutex
	enc   interface{ Encode(any) error }
	slots chan struct{} // one per call running: at most maxInflight

	mu        sync.Mutex
	teams     map[string]store.Team
	calls     map[int64]*call
	followers map[int64]store.Follower
	nextF     int64
	stopping  bool           // ctx ended: no new call starts
	inflight  sync.WaitGroup // calls running (Add under mu, before stopping)
}

// write sends one line, within writeTimeout when the connection has
// deadlines (a socket).
func (s *session) write(v any) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if d, ok := s.conn.(interface{ SetWriteDeadline(time.Time) error }); ok {
		d.SetWriteDeadline(time.Now().Add(writeTimeout))
	}
	return s.enc.Encode(v)
}

// hangUp closes a connection whose client reads no answers, which ends
// the read loop: nothing more of it is read or run.
func (s *session) hangUp() {
	if c, ok := s.conn.(io.Closer); ok {
		c.Close()
	}
}

func (s *session) cancel(id int64) {
	s.mu.Lock()
	c := s.calls[id]
	if c != nil {
		c.byClient = true
	}
	s.mu.Unlock()
	if c != nil {
		c.cancel()
	}
}

func (s *session) closeFollowers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, f := range s.followers {
		f.Close()
		delete(s.followers, id)
	}
}

func (s *session) team(name string) (store.Team, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.teams[name]; ok {
		return t, nil
	}
	t, err := s.st.Team(name)
	if err != nil {
		return nil, err
	}
	s.teams[name] = t
	return t, nil
}

func (s *session) follower(id int64) (store.Follower, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.followers[id]
	if !ok {
		return nil, fmt.Errorf("store agent: no follower %d", id)
	}
	return f, nil
}

// rawResult is a result already encoded.
type rawResult []byte

// taskResult and tasksResult encode tasks as stored, with the fields this
// version does not know.
type taskResult struct{ t *protocol.Task }
type tasksResult []protocol.Task

func marshalResult(v any) (json.RawMessage, error) {
	switch r := v.(type) {
	case rawResult:
		return json.RawMessage(r), nil
	case taskResult:
		return queue.EncodeTask(r.t)
	case tasksResult:
		out := []byte{'['}
		for i := range r {
			b, err := queue.EncodeTask(&r[i])
			if err != nil {
				return nil, err
			}
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, b...)
		}
		return append(out, ']'), nil
	}
	return json.Marshal(v)
}

func oneTask(t *protocol.Task, err error) (any, error) {
	if err != nil || t == nil {
		return nil, err
	}
	return taskResult{t}, nil
}

func taskList(ts []protocol.Task, err error) (any, error) {
	if err != nil || ts == nil {
		return nil, err
	}
	return tasksResult(ts), nil
}

func ns(n int64) time.Duration { return time.Duration(n) }

// leaseOf is a request's lease_ns: none (0) is the default lease, and a
// negative one bad input, as pg-queue's --lease refuses it (store.Tasks
// takes any lease ≤ 0 as the default; the client sends none for those).
func leaseOf(r *protocol.StoreAgentRequest) (time.Duration, error) {
	if r.LeaseNS < 0 {
		return 0, &queue.InputError{Index: -1, Msg: fmt.Sprintf("lease_ns must not be negative, got %d", r.LeaseNS)}
	}
	return ns(r.LeaseNS), nil
}

// handle runs one request.
func (s *session) handle(ctx context.Context, r *protocol.StoreAgentRequest) (any, error) {
	switch r.Op {
	case "follow_next":
		f, err := s.follower(r.Follower)
		if err != nil {
			return nil, err
		}
		b, err := f.Next(ctx)
		if err != nil {
			return nil, err
		}
		return rawResult(b), nil
	case "follow_close":
		s.mu.Lock()
		f := s.followers[r.Follower]
		delete(s.followers, r.Follower)
		s.mu.Unlock()
		if f != nil {
			return nil, f.Close()
		}
		return nil, nil
	}
	tm, err := s.team(r.Team)
	if err != nil {
		return nil, err
	}
	q := tm.Tasks()
	switch r.Op {
	case "team":
		return nil, nil
	case "exists":
		return nil, tm.Exists(ctx)
	case "add":
		in := make([]protocol.Task, len(r.Tasks))
		for i, b := range r.Tasks {
			if err := queue.DecodeStoredTask(b, &in[i]); err != nil {
				return nil, fmt.Errorf("store agent: task %d: %w", i, err)
			}
		}
		return taskList(q.Add(in))
	case "claim": // a WaitClaim that does not wait, for the claim id
		lease, err := leaseOf(r)
		if err != nil {
			return nil, err
		}
		return oneTask(q.WaitClaim(queue.WithClaimID(ctx, r.ClaimID), r.Worker, lease, 0))
	case "wait_claim":
		lease, err := leaseOf(r)
		if err != nil {
			return nil, err
		}
		return oneTask(q.WaitClaim(queue.WithClaimID(ctx, r.ClaimID), r.Worker, lease, ns(r.WaitNS)))
	case "renew":
		lease, err := leaseOf(r)
		if err != nil {
			return nil, err
		}
		return oneTask(q.Renew(r.Task, r.Token, lease))
	case "complete":
		return oneTask(q.Complete(r.Task, r.Token, r.Result))
	case "fail":
		return oneTask(q.Fail(r.Task, r.Token, r.Message, r.Retry))
	case "release":
		return oneTask(q.Release(r.Task, r.Token))
	case "unclaim":
		return oneTask(q.Unclaim(r.Task, r.Token, r.Message))
	case "release_worker":
		return taskList(q.ReleaseWorker(r.Worker, r.Message, r.Token))
	case "cancel_task":
		return oneTask(q.Cancel(r.Task, r.Message))
	case "cancel_all":
		return taskList(q.CancelAll(r.IDs, r.Message))
	case "list":
		return taskList(q.List(queue.ListOptions{Status: r.Status, Worker: r.Worker, Archived: r.Archived}))
	case "show":
		return oneTask(q.Show(r.Task))
	case "stats":
		return q.Stats()
	case "archive":
		return q.Archive(ns(r.OlderThanNS))
	case "prune":
		return q.Prune(ns(r.OlderThanNS))
	case "append":
		recs := make([]any, len(r.Records))
		for i, b := range r.Records {
			recs[i] = b
		}
		return nil, tm.Journal().Append(ctx, recs...)
	case "follow":
		return s.follow(tm, r.FromStart)
	}
	return s.handleRecords(ctx, tm, r)
}

// follow opens a follower that lives as long as the connection.
func (s *session) follow(tm store.Team, fromStart bool) (any, error) {
	f, err := tm.Journal().Follow(context.Background(), fromStart)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.nextF++
	id := s.nextF
	s.followers[id] = f
	s.mu.Unlock()
	return id, nil
}

// handleRecords runs the ops on worker records and the budget.
func (s *session) handleRecords(ctx context.Context, tm store.Team, r *protocol.StoreAgentRequest) (any, error) {
	w := tm.Workers()
	switch r.Op {
	case "worker_read":
		return w.Read(ctx, r.Worker)
	case "worker_cas":
		var rec protocol.Worker
		if err := json.Unmarshal(r.Record, &rec); err != nil {
			return nil, fmt.Errorf("store agent: worker record: %w", err)
		}
		return w.Update(ctx, r.Worker, func(old *protocol.Worker) (*protocol.Worker, error) {
			if err := same(old, r.Expect); err != nil {
				return nil, err
			}
			return &rec, nil
		})
	case "worker_write":
		var rec protocol.Worker
		if err := json.Unmarshal(r.Record, &rec); err != nil {
			return nil, fmt.Errorf("store agent: worker record: %w", err)
		}
		if r.Worker != "" && r.Worker != rec.Worker {
			// The record goes under its own name: one the client meant
			// for another key would be a second record of that worker.
			return nil, &queue.InputError{Index: -1, Msg: fmt.Sprintf("worker record of %q written as %q", r.Worker, rec.Worker)}
		}
		return nil, w.Write(ctx, &rec)
	case "worker_list":
		recs, errs := w.List(ctx)
		out := workerList{Workers: recs}
		for _, e := range errs {
			out.Errors = append(out.Errors, encodeError(e))
		}
		return out, nil
	case "velocity":
		return w.Velocity(ctx, r.Worker)
	case "set_velocity":
		if r.Velocity == nil {
			return nil, errors.New("store agent: set_velocity without a velocity")
		}
		return nil, w.SetVelocity(ctx, r.Worker, *r.Velocity)
	case "answer":
		if r.Answer == nil {
			return nil, errors.New("store agent: answer without an answer")
		}
		return nil, w.Answer(ctx, *r.Answer)
	case "take_answer":
		a, ok, err := w.TakeAnswer(ctx, r.Worker, r.Call)
		if err != nil {
			return nil, err
		}
		return takenAnswer{Answer: a, OK: ok}, nil
	case "budget_read":
		return tm.Budget().Read(ctx)
	case "budget_cas":
		var tb protocol.TeamBudget
		if err := json.Unmarshal(r.Record, &tb); err != nil {
			return nil, fmt.Errorf("store agent: budget: %w", err)
		}
		return tm.Budget().Update(ctx, func(old *protocol.TeamBudget) (*protocol.TeamBudget, error) {
			if err := same(old, r.Expect); err != nil {
				return nil, err
			}
			return &tb, nil
		})
	}
	return nil, fmt.Errorf("store agent: unknown op %q", r.Op)
}

// same checks that the stored document old is the one the client read
// (expect, as the read encoded it; null or absent for none).
func same[T any](old *T, expect json.RawMessage) error {
	var cur []byte
	if old != nil {
		b, err := json.Marshal(old)
		if err != nil {
			return err
		}
		cur = b
	}
	e := expect
	if string(e) == "null" {
		e = nil
	}
	if string(cur) != string(e) {
		return errConflict
	}
	return nil
}

// workerList is worker_list's result.
type workerList struct {
	Workers []*protocol.Worker          `json:"workers"`
	Errors  []*protocol.StoreAgentError `json:"errors,omitempty"`
}

// takenAnswer is take_answer's result.
type takenAnswer struct {
	Answer protocol.ApprovalAnswer `json:"answer"`
	OK     bool                    `json:"ok"`
}
