package remote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
)

// tasks is a team's queue through the agent.
type tasks struct{ t *team }

var _ store.Tasks = (*tasks)(nil)

func decodeTask(b json.RawMessage) (*protocol.Task, error) {
	t := new(protocol.Task)
	if err := queue.DecodeStoredTask(b, t); err != nil {
		return nil, fmt.Errorf("store agent: task: %w", err)
	}
	return t, nil
}

func decodeTasks(b json.RawMessage) ([]protocol.Task, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		return nil, fmt.Errorf("store agent: tasks: %w", err)
	}
	out := make([]protocol.Task, len(raws))
	for i, r := range raws {
		if err := queue.DecodeStoredTask(r, &out[i]); err != nil {
			return nil, fmt.Errorf("store agent: task: %w", err)
		}
	}
	return out, nil
}

// run runs a call whose result decode reads, on the direct store's queue
// when the connection is lost (and again allows it after the send).
func run[T any](ctx context.Context, q *tasks, req *protocol.StoreAgentRequest, decode func(json.RawMessage) (T, error), again bool, direct func(store.Tasks) (T, error)) (T, error) {
	var out T
	err := q.t.c.do(ctx, req, func(b json.RawMessage) (err error) {
		out, err = decode(b)
		return err
	}, again, directTeam(q.t.name, func(tm store.Team) (err error) {
		out, err = direct(tm.Tasks())
		return err
	}))
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// one runs a call whose result is one task.
func (q *tasks) one(ctx context.Context, req *protocol.StoreAgentRequest, again bool, direct func(store.Tasks) (*protocol.Task, error)) (*protocol.Task, error) {
	return run(ctx, q, req, decodeTask, again, direct)
}

// many runs a call whose result is a list of tasks.
func (q *tasks) many(req *protocol.StoreAgentRequest, again bool, direct func(store.Tasks) ([]protocol.Task, error)) ([]protocol.Task, error) {
	return run(context.Background(), q, req, decodeTasks, again, direct)
}

// count runs a call whose result is a number of tasks.
func (q *tasks) count(req *protocol.StoreAgentRequest, direct func(store.Tasks) (int, error)) (int, error) {
	var n int
	err := q.t.c.do(context.Background(), req, into(&n), false, directTeam(q.t.name, func(tm store.Team) (err error) {
		n, err = direct(tm.Tasks())
		return err
	}))
	return n, err
}

func (q *tasks) Add(in []protocol.Task) ([]protocol.Task, error) {
	req := q.t.req("add")
	for i := range in {
		b, err := queue.EncodeTask(&in[i])
		if err != nil {
			return nil, err
		}
		req.Tasks = append(req.Tasks, b)
	}
	return q.many(req, false, func(s store.Tasks) ([]protocol.Task, error) { return s.Add(in) })
}

// Renew and complete may run twice: a renew extends the lease again, and
// a second complete with the same token is a harmless success. A claim
// may not: see claim.

func (q *tasks) Claim(worker string, lease time.Duration) (*protocol.Task, error) {
	req := q.t.req("claim")
	req.Worker, req.LeaseNS = worker, leaseNS(lease)
	return q.claim(context.Background(), req, worker, func(s store.Tasks) (*protocol.Task, error) { return s.Claim(worker, lease) })
}

func (q *tasks) WaitClaim(ctx context.Context, worker string, lease, wait time.Duration) (*protocol.Task, error) {
	req := q.t.req("wait_claim")
	req.Worker, req.LeaseNS, req.WaitNS = worker, leaseNS(lease), int64(wait)
	start := time.Now()
	return q.claim(ctx, req, worker, func(s store.Tasks) (*protocol.Task, error) {
		if wait <= 0 {
			return s.WaitClaim(ctx, worker, lease, wait)
		}
		// The time waited on the agent counts: the command waits no
		// longer than it was asked to in all.
		left := wait - time.Since(start)
		if left <= 0 {
			return s.Claim(worker, lease)
		}
		return s.WaitClaim(ctx, worker, lease, left)
	})
}

// claim runs a claim (claim, wait_claim), on the direct store when the
// connection is lost. A claim lost after it was sent may have claimed a
// task on the agent before it died: the direct path then adopts that claim
// (returns its task) rather than claim a second one, which would stay held
// until its lease ended, an attempt used and its dependents blocked. The
// claim carries an id of its own, which the store records with it, so the
// adoption finds exactly that claim, whatever the clocks and whoever else
// claims under the same worker name.
func (q *tasks) claim(ctx context.Context, req *protocol.StoreAgentRequest, worker string, direct func(store.Tasks) (*protocol.Task, error)) (*protocol.Task, error) {
	req.ClaimID = queue.ClaimID(ctx)
	if req.ClaimID == "" {
		req.ClaimID = newClaimID()
	}
	var out *protocol.Task
	err := q.t.c.doSent(ctx, req, func(b json.RawMessage) (err error) {
		out, err = decodeTask(b)
		return err
	}, true, func(st store.Store, lost bool) error {
		tm, err := st.Team(q.t.name)
		if err != nil {
			return err
		}
		if lost {
			if out, err = adopt(tm.Tasks(), worker, req.ClaimID); err != nil || out != nil {
				return err
			}
		}
		out, err = direct(tm.Tasks())
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// newClaimID is a claim id no other claim has: 128 random bits.
func newClaimID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// adopt returns the claim a lost claim call made, if it made one: worker's
// claimed task whose claim has the call's id.
func adopt(q store.Tasks, worker, id string) (*protocol.Task, error) {
	held, err := q.List(queue.ListOptions{Status: []string{protocol.StatusClaimed}, Worker: worker})
	if err != nil {
		return nil, err
	}
	for i := range held {
		if t := &held[i]; t.Claim != nil && t.Claim.Worker == worker && t.Claim.ID == id {
			return t, nil
		}
	}
	return nil, nil
}

func (q *tasks) Renew(id string, token int64, lease time.Duration) (*protocol.Task, error) {
	req := q.t.req("renew")
	req.Task, req.Token, req.LeaseNS = id, token, leaseNS(lease)
	return q.one(context.Background(), req, true, func(s store.Tasks) (*protocol.Task, error) { return s.Renew(id, token, lease) })
}

func (q *tasks) Complete(id string, token int64, result json.RawMessage) (*protocol.Task, error) {
	req := q.t.req("complete")
	req.Task, req.Token, req.Result = id, token, result
	if len(result) > 0 && !json.Valid(result) {
		// The wire carries JSON only: the queue's own check says what is
		// wrong, as the store would.
		return nil, queue.CheckResult(result)
	}
	return q.one(context.Background(), req, true, func(s store.Tasks) (*protocol.Task, error) { return s.Complete(id, token, result) })
}

func (q *tasks) Fail(id string, token int64, msg string, retry bool) (*protocol.Task, error) {
	req := q.t.req("fail")
	req.Task, req.Token, req.Message, req.Retry = id, token, msg, retry
	return q.one(context.Background(), req, false, func(s store.Tasks) (*protocol.Task, error) { return s.Fail(id, token, msg, retry) })
}

func (q *tasks) Release(id string, token int64) (*protocol.Task, error) {
	req := q.t.req("release")
	req.Task, req.Token = id, token
	return q.one(context.Background(), req, false, func(s store.Tasks) (*protocol.Task, error) { return s.Release(id, token) })
}

func (q *tasks) Unclaim(id string, token int64, reason string) (*protocol.Task, error) {
	req := q.t.req("unclaim")
	req.Task, req.Token, req.Message = id, token, reason
	return q.one(context.Background(), req, false, func(s store.Tasks) (*protocol.Task, error) { return s.Unclaim(id, token, reason) })
}

func (q *tasks) ReleaseWorker(worker, reason string, before int64) ([]protocol.Task, error) {
	req := q.t.req("release_worker")
	req.Worker, req.Message, req.Token = worker, reason, before
	return q.many(req, false, func(s store.Tasks) ([]protocol.Task, error) { return s.ReleaseWorker(worker, reason, before) })
}

func (q *tasks) Cancel(id, reason string) (*protocol.Task, error) {
	req := q.t.req("cancel_task")
	req.Task, req.Message = id, reason
	return q.one(context.Background(), req, false, func(s store.Tasks) (*protocol.Task, error) { return s.Cancel(id, reason) })
}

func (q *tasks) CancelAll(ids []string, reason string) ([]protocol.Task, error) {
	req := q.t.req("cancel_all")
	req.IDs, req.Message = ids, reason
	return q.many(req, false, func(s store.Tasks) ([]protocol.Task, error) { return s.CancelAll(ids, reason) })
}

func (q *tasks) List(opts queue.ListOptions) ([]protocol.Task, error) {
	req := q.t.req("list")
	req.Status, req.Worker, req.Archived = opts.Status, opts.Worker, opts.Archived
	return q.many(req, true, func(s store.Tasks) ([]protocol.Task, error) { return s.List(opts) })
}

func (q *tasks) Show(id string) (*protocol.Task, error) {
	req := q.t.req("show")
	req.Task = id
	return q.one(context.Background(), req, true, func(s store.Tasks) (*protocol.Task, error) { return s.Show(id) })
}

func (q *tasks) Stats() (*protocol.QueueStats, error) {
	var out *protocol.QueueStats
	err := q.t.c.do(context.Background(), q.t.req("stats"), into(&out), true, directTeam(q.t.name, func(tm store.Team) (err error) {
		out, err = tm.Tasks().Stats()
		return err
	}))
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (q *tasks) Archive(olderThan time.Duration) (int, error) {
	req := q.t.req("archive")
	req.OlderThanNS = int64(olderThan)
	return q.count(req, func(s store.Tasks) (int, error) { return s.Archive(olderThan) })
}

func (q *tasks) Prune(olderThan time.Duration) (int, error) {
	req := q.t.req("prune")
	req.OlderThanNS = int64(olderThan)
	return q.count(req, func(s store.Tasks) (int, error) { return s.Prune(olderThan) })
}

// leaseNS is a lease as the wire carries it: store.Tasks takes any lease
// ≤ 0 as the default one, which the wire says with none (0); a negative
// lease_ns is refused there.
func leaseNS(lease time.Duration) int64 { return int64(max(lease, 0)) }
