package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
)

// journal is a team's journal through the agent.
type journal struct{ t *team }

func (j *journal) Append(ctx context.Context, records ...any) error {
	req := j.t.req("append")
	for _, r := range records {
		b, err := jsonl.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode journal record: %w", err)
		}
		req.Records = append(req.Records, json.RawMessage(b[:len(b)-1]))
	}
	return j.t.c.do(ctx, req, nil, false, directTeam(j.t.name, func(tm store.Team) error { return tm.Journal().Append(ctx, records...) }))
}

// Follow follows through the agent, which holds the follower: records
// come one call (follow_next) each. A lost connection ends it with an
// error; there is no direct fallback, which could not resume at the same
// record.
func (j *journal) Follow(ctx context.Context, fromStart bool) (store.Follower, error) {
	req := j.t.req("follow")
	req.FromStart = fromStart
	var id int64
	if err := j.t.c.do(ctx, req, into(&id), false, nil); err != nil {
		return nil, err
	}
	return &follower{c: j.t.c, id: id}, nil
}

type follower struct {
	c  *Client
	id int64
}

func (f *follower) Next(ctx context.Context) ([]byte, error) {
	res, err := f.c.call(ctx, &protocol.StoreAgentRequest{Op: "follow_next", Follower: f.id})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (f *follower) Close() error {
	_, err := f.c.call(context.Background(), &protocol.StoreAgentRequest{Op: "follow_close", Follower: f.id})
	var lost *LostError
	if errors.As(err, &lost) {
		return nil // the agent closed it with the connection
	}
	return err
}

// workers are a team's worker records through the agent.
type workers struct{ t *team }

func (w *workers) Read(ctx context.Context, worker string) (*protocol.Worker, error) {
	rec, _, err := w.read(ctx, worker)
	return rec, err
}

// read returns the record and its encoding as the agent sent it.
func (w *workers) read(ctx context.Context, worker string) (*protocol.Worker, json.RawMessage, error) {
	req := w.t.req("worker_read")
	req.Worker = worker
	var rec *protocol.Worker
	var raw json.RawMessage
	err := w.t.c.do(ctx, req, func(b json.RawMessage) error {
		raw = b
		return json.Unmarshal(b, &rec)
	}, true, directTeam(w.t.name, func(tm store.Team) (err error) {
		rec, err = tm.Workers().Read(ctx, worker)
		return err
	}))
	if err != nil {
		return nil, nil, err
	}
	return rec, raw, nil
}

// Update reads the record, lets fn change it and writes the result only
// if the record is still the one read (the agent compares and writes under
// the store's own lock), reading again until it is.
func (w *workers) Update(ctx context.Context, worker string, fn func(old *protocol.Worker) (*protocol.Worker, error)) (*protocol.Worker, error) {
	return casUpdate(ctx, w.t, "worker_cas", worker,
		func() (*protocol.Worker, json.RawMessage, error) { return w.read(ctx, worker) },
		fn,
		func(st store.Team) (*protocol.Worker, error) { return st.Workers().Update(ctx, worker, fn) })
}

// maxConflicts bounds the retries of a compare-and-write: far more than
// any real contention needs, so that a document whose encoding never
// matches cannot loop forever.
const maxConflicts = 1000

// casUpdate is Update over read and compare-and-write. A connection lost
// before the write runs the whole Update directly; one lost during the
// write is an error, since the write may have happened.
func casUpdate[T any](ctx context.Context, t *team, op, worker string, read func() (*T, json.RawMessage, error), fn func(*T) (*T, error), direct func(store.Team) (*T, error)) (*T, error) {
	for range maxConflicts {
		old, raw, err := read()
		var lost *LostError
		if errors.As(err, &lost) {
			return nil, err
		}
		if err != nil {
			// None, or unreadable (corrupt, of a newer version): fn gets
			// nil, as from the stores' own Update (a heartbeat must go
			// through), and the agent writes only if the stored record
			// is still absent or unreadable.
			old, raw = nil, nil
		}
		if t.c.broken() {
			// The read may have come from the direct store: nothing to
			// compare with on the agent, so the whole update runs there.
			return runDirect(t, direct)
		}
		nw, err := fn(old)
		if err != nil || nw == nil {
			return nw, err
		}
		b, err := json.Marshal(nw)
		if err != nil {
			return nil, err
		}
		req := t.req(op)
		req.Worker, req.Record, req.Expect = worker, b, raw
		if raw == nil {
			req.Expect = json.RawMessage("null")
		}
		var out *T
		err = t.c.do(ctx, req, into(&out), false, func(store.Store) error {
			out, err = runDirect(t, direct)
			return err
		})
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, fmt.Errorf("store agent: %s: the record kept changing (%d tries)", op, maxConflicts)
}

func runDirect[T any](t *team, fn func(store.Team) (*T, error)) (*T, error) {
	st, err := t.c.directStore()
	if err != nil {
		return nil, err
	}
	tm, err := st.Team(t.name)
	if err != nil {
		return nil, err
	}
	return fn(tm)
}

func (w *workers) Write(ctx context.Context, rec *protocol.Worker) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	req := w.t.req("worker_write")
	req.Worker, req.Record = rec.Worker, b
	return w.t.c.do(ctx, req, nil, true, directTeam(w.t.name, func(tm store.Team) error { return tm.Workers().Write(ctx, rec) }))
}

func (w *workers) List(ctx context.Context) ([]*protocol.Worker, []error) {
	var out workerList
	var recs []*protocol.Worker
	var errs []error
	err := w.t.c.do(ctx, w.t.req("worker_list"), into(&out), true, directTeam(w.t.name, func(tm store.Team) error {
		recs, errs = tm.Workers().List(ctx)
		out.Workers = nil
		return nil
	}))
	if err != nil {
		return nil, []error{err}
	}
	if recs != nil || errs != nil {
		return recs, errs
	}
	for _, e := range out.Errors {
		errs = append(errs, decodeError(e))
	}
	return out.Workers, errs
}

func (w *workers) Velocity(ctx context.Context, worker string) (float64, error) {
	req := w.t.req("velocity")
	req.Worker = worker
	var v float64
	err := w.t.c.do(ctx, req, into(&v), true, directTeam(w.t.name, func(tm store.Team) (err error) {
		v, err = tm.Workers().Velocity(ctx, worker)
		return err
	}))
	return v, err
}

func (w *workers) SetVelocity(ctx context.Context, worker string, v float64) error {
	req := w.t.req("set_velocity")
	req.Worker, req.Velocity = worker, &v
	return w.t.c.do(ctx, req, nil, true, directTeam(w.t.name, func(tm store.Team) error { return tm.Workers().SetVelocity(ctx, worker, v) }))
}

func (w *workers) Answer(ctx context.Context, a protocol.ApprovalAnswer) error {
	req := w.t.req("answer")
	req.Answer = &a
	return w.t.c.do(ctx, req, nil, true, directTeam(w.t.name, func(tm store.Team) error { return tm.Workers().Answer(ctx, a) }))
}

func (w *workers) TakeAnswer(ctx context.Context, worker, call string) (protocol.ApprovalAnswer, bool, error) {
	req := w.t.req("take_answer")
	req.Worker, req.Call = worker, call
	var out takenAnswer
	err := w.t.c.do(ctx, req, into(&out), false, directTeam(w.t.name, func(tm store.Team) (err error) {
		out.Answer, out.OK, err = tm.Workers().TakeAnswer(ctx, worker, call)
		return err
	}))
	return out.Answer, out.OK, err
}

// budget is a team's budget ledger through the agent.
type budget struct{ t *team }

func (b *budget) Read(ctx context.Context) (*protocol.TeamBudget, error) {
	tb, _, err := b.read(ctx)
	return tb, err
}

func (b *budget) read(ctx context.Context) (*protocol.TeamBudget, json.RawMessage, error) {
	var tb *protocol.TeamBudget
	var raw json.RawMessage
	err := b.t.c.do(ctx, b.t.req("budget_read"), func(m json.RawMessage) error {
		raw = m
		return json.Unmarshal(m, &tb)
	}, true, directTeam(b.t.name, func(tm store.Team) (err error) {
		tb, err = tm.Budget().Read(ctx)
		return err
	}))
	if err != nil {
		return nil, nil, err
	}
	return tb, raw, nil
}

func (b *budget) Update(ctx context.Context, fn func(old *protocol.TeamBudget) (*protocol.TeamBudget, error)) (*protocol.TeamBudget, error) {
	return casUpdate(ctx, b.t, "budget_cas", "",
		func() (*protocol.TeamBudget, json.RawMessage, error) { return b.read(ctx) },
		fn,
		func(st store.Team) (*protocol.TeamBudget, error) { return st.Budget().Update(ctx, fn) })
}
