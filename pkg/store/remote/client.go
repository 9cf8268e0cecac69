package remote

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
)

// Options tune a client.
type Options struct {
	// Direct opens the store directly, for the calls the agent cannot
	// answer: when the connection is lost, a call not yet sent, and one
	// sent that may safely run twice (a read, claim, renew, complete), run
	// on it instead. Nil: such calls fail.
	Direct func() (store.Store, error)
	// HelloTimeout bounds the wait for the agent's hello (default 5 s).
	HelloTimeout time.Duration
}

// Conn is a client's connection to an agent: a Unix socket, or a pair of
// pipes to an agent coprocess.
type Conn interface {
	io.ReadWriteCloser
	SetReadDeadline(time.Time) error
}

// Client is a store.Store whose calls an agent answers over conn.
type Client struct {
	conn  Conn
	hello protocol.StoreAgentHello
	opts  Options

	wmu sync.Mutex
	enc interface{ Encode(any) error }

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan *protocol.StoreAgentResponse
	dead    chan struct{} // closed when the connection is lost
	lost    error
	stopped bool // the agent said it ran none of the calls unanswered

	dmu    sync.Mutex
	direct store.Store
}

var _ store.Store = (*Client)(nil)

// NewClient reads the agent's hello on conn and returns a client that
// owns conn. An agent of another protocol version is an error.
func NewClient(conn Conn, o Options) (*Client, error) {
	if o.HelloTimeout <= 0 {
		o.HelloTimeout = 5 * time.Second
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	conn.SetReadDeadline(time.Now().Add(o.HelloTimeout))
	line, err := r.ReadBytes('\n')
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("store agent: read hello: %w", err)
	}
	conn.SetReadDeadline(time.Time{})
	c := &Client{conn: conn, opts: o, enc: jsonl.NewEncoder(conn),
		pending: map[int64]chan *protocol.StoreAgentResponse{}, dead: make(chan struct{})}
	if err := json.Unmarshal(line, &c.hello); err != nil || c.hello.Type != "hello" {
		conn.Close()
		return nil, fmt.Errorf("store agent: bad hello %q", line)
	}
	if c.hello.Protocol != protocol.StoreAgentProtocol {
		conn.Close()
		return nil, fmt.Errorf("store agent: protocol %d, want %d", c.hello.Protocol, protocol.StoreAgentProtocol)
	}
	go c.read(r)
	return c, nil
}

// Hello is the agent's hello.
func (c *Client) Hello() protocol.StoreAgentHello { return c.hello }

// Kind is the kind of the store the agent serves.
func (c *Client) Kind() string { return c.hello.Store }

// Close closes the connection (the agent closes the followers it held)
// and the direct store, if one was opened.
func (c *Client) Close() error {
	err := c.conn.Close()
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.direct != nil {
		c.direct.Close()
		c.direct = nil
	}
	return err
}

// Team returns one team's state; an invalid name is bad input, as the
// agent's store says it.
func (c *Client) Team(name string) (store.Team, error) {
	t := &team{c: c, name: name}
	err := c.do(context.Background(), &protocol.StoreAgentRequest{Op: "team", Team: name}, nil, true, func(st store.Store) error {
		_, err := st.Team(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// read delivers responses to their calls until the connection ends.
func (c *Client) read(r *bufio.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var err error
	stopped := false
	for sc.Scan() {
		resp := new(protocol.StoreAgentResponse)
		if err = json.Unmarshal(sc.Bytes(), resp); err != nil {
			break
		}
		if resp.ID == 0 && resp.Error != nil && resp.Error.Kind == "stopping" {
			// The agent's last line: it ran none of the calls it has not
			// answered.
			stopped, err = true, errors.New("the agent is stopping")
			break
		}
		c.mu.Lock()
		ch := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- resp
		}
	}
	if err == nil {
		err = sc.Err()
	}
	if err == nil {
		err = errors.New("the agent closed the connection")
	}
	c.mu.Lock()
	c.lost, c.stopped = err, stopped
	close(c.dead)
	c.mu.Unlock()
}

// LostError is a call the agent did not answer because the connection
// ended. Sent tells whether the request may have reached the agent.
type LostError struct {
	Op   string
	Sent bool
	Err  error
}

func (e *LostError) Error() string {
	if e.Sent {
		return fmt.Sprintf("store agent: connection lost during %s, which may or may not have taken effect: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("store agent: connection lost before %s: %v", e.Op, e.Err)
}

func (e *LostError) Unwrap() error { return e.Err }

// call sends req and waits for its response; ctx ending cancels the call
// on the agent, whose answer is still awaited (a wait_claim may have
// claimed a task by then).
func (c *Client) call(ctx context.Context, req *protocol.StoreAgentRequest) (json.RawMessage, error) {
	ch := make(chan *protocol.StoreAgentResponse, 1)
	c.mu.Lock()
	select {
	case <-c.dead:
		err := c.lost
		c.mu.Unlock()
		return nil, &LostError{Op: req.Op, Err: err}
	default:
	}
	c.nextID++
	req.ID = c.nextID
	c.pending[req.ID] = ch
	c.mu.Unlock()
	redact(req)
	c.wmu.Lock()
	err := c.enc.Encode(req)
	c.wmu.Unlock()
	if err != nil {
		c.mu.Lock()
		delete(c.pending, req.ID)
		c.mu.Unlock()
		c.conn.Close()
		return nil, &LostError{Op: req.Op, Err: err}
	}
	done := ctx.Done()
	cancelled := false
	for {
		select {
		case resp := <-ch:
			return c.answer(ctx, req.Op, resp, cancelled)
		case <-c.dead:
			// The reader may have delivered the response just before.
			select {
			case resp := <-ch:
				return c.answer(ctx, req.Op, resp, cancelled)
			default:
			}
			// An agent that said it stopped did not run this call: it
			// may run elsewhere as one never sent.
			return nil, &LostError{Op: req.Op, Sent: !c.stopped, Err: c.lost}
		case <-done:
			done, cancelled = nil, true
			c.wmu.Lock()
			c.enc.Encode(&protocol.StoreAgentRequest{Op: "cancel", ID: req.ID})
			c.wmu.Unlock()
		}
	}
}

// answer is a call's result or error. An agent that is stopping says so
// for a call it did not run: the call goes on as if the connection had
// been lost before it was sent. A cancellation this client did not ask
// for (an agent of an earlier version, stopping) is a lost connection too,
// never this client's own cancel.
func (c *Client) answer(ctx context.Context, op string, resp *protocol.StoreAgentResponse, cancelled bool) (json.RawMessage, error) {
	if resp.Error == nil {
		return resp.Result, nil
	}
	switch kind := resp.Error.Kind; {
	case kind == "stopping":
		return nil, &LostError{Op: op, Err: errors.New("the agent is stopping")}
	case kind == "canceled" && cancelled && ctx.Err() != nil:
		// Cancelled for this ctx: say why, as a local call would.
		return nil, ctx.Err()
	case kind == "canceled":
		return nil, &LostError{Op: op, Sent: true, Err: errors.New("the agent cancelled the call")}
	}
	return nil, decodeError(resp.Error)
}

// broken tells whether the connection was lost.
func (c *Client) broken() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

// directStore returns the direct store, opened on first use.
func (c *Client) directStore() (store.Store, error) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.direct == nil {
		if c.opts.Direct == nil {
			return nil, errors.New("store agent: connection lost, and no direct store")
		}
		st, err := c.opts.Direct()
		if err != nil {
			return nil, err
		}
		c.direct = st
	}
	return c.direct, nil
}

// do runs one call and decodes its result into out (when out is not nil
// and there is one). When the connection is lost, a call not sent, or one
// that may run twice (again), runs on the direct store instead.
func (c *Client) do(ctx context.Context, req *protocol.StoreAgentRequest, decode func(json.RawMessage) error, again bool, direct func(store.Store) error) error {
	var d func(store.Store, bool) error
	if direct != nil {
		d = func(st store.Store, _ bool) error { return direct(st) }
	}
	return c.doSent(ctx, req, decode, again, d)
}

// doSent is do whose direct call learns whether the lost request had been
// sent (and so may have taken effect on the agent).
func (c *Client) doSent(ctx context.Context, req *protocol.StoreAgentRequest, decode func(json.RawMessage) error, again bool, direct func(st store.Store, sent bool) error) error {
	res, err := c.call(ctx, req)
	var lost *LostError
	if errors.As(err, &lost) {
		if c.opts.Direct == nil || direct == nil || (lost.Sent && !again) {
			return err
		}
		st, derr := c.directStore()
		if derr != nil {
			return fmt.Errorf("%v; and directly: %w", err, derr)
		}
		return direct(st, lost.Sent)
	}
	if err != nil {
		return err
	}
	if decode != nil && len(res) > 0 && string(res) != "null" {
		return decode(res)
	}
	return nil
}

// directTeam runs fn on team name of a direct store.
func directTeam(name string, fn func(store.Team) error) func(store.Store) error {
	return func(st store.Store) error {
		tm, err := st.Team(name)
		if err != nil {
			return err
		}
		return fn(tm)
	}
}

type team struct {
	c    *Client
	name string
}

func (t *team) Name() string           { return t.name }
func (t *team) Tasks() store.Tasks     { return &tasks{t} }
func (t *team) Journal() store.Journal { return &journal{t} }
func (t *team) Workers() store.Workers { return &workers{t} }
func (t *team) Budget() store.Budget   { return &budget{t} }

func (t *team) req(op string) *protocol.StoreAgentRequest {
	return &protocol.StoreAgentRequest{Op: op, Team: t.name}
}

func (t *team) Exists(ctx context.Context) error {
	return t.c.do(ctx, t.req("exists"), nil, true, directTeam(t.name, func(tm store.Team) error { return tm.Exists(ctx) }))
}

// into decodes a JSON result into v.
func into(v any) func(json.RawMessage) error {
	return func(b json.RawMessage) error { return json.Unmarshal(b, v) }
}
