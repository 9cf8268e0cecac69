package loop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/powerglide/powerglide/pkg/ledger"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// LimitTeamBudget is the limit of a call the team's budget refused.
const LimitTeamBudget = "team_budget"

// budgetRetry is how often a call waiting for other calls to settle asks
// the ledger again.
const budgetRetry = 250 * time.Millisecond

// call makes one model call within the team's budget: it reserves the
// call's estimated cost in the team ledger first (waiting while only other
// calls in flight stand in the way), and settles the real cost after: at
// the loop's estimate when the provider reported no usage (charged), for a
// failed call what its cut attempts were charged (chargeFailed), and for a
// call interrupted mid-way the estimate of its input.
// A call the budget refuses returns a *LimitError (LimitTeamBudget).
func (r *Runner) call(ctx context.Context, req *protocol.Request, on func(any)) (*protocol.EndEvent, error) {
	start := time.Now()
	id, err := r.reserve(ctx, req)
	r.times.wait += time.Since(start) // waiting on the team's other calls
	if err != nil {
		return nil, err
	}
	end, err := r.o.LLM.Call(ctx, req, on)
	var cost float64
	switch {
	case end != nil:
		end.Usage = r.charged(req, end)
		cost = r.callCost(end.Usage)
	case err != nil:
		cost = r.chargeFailed(err)
		if cost == 0 && ctx.Err() != nil && id != "" {
			// Interrupted mid-call (SIGTERM, a lost lease): the request
			// was most likely sent and its input paid for. The ledger
			// errs on the side of the budget.
			cost, _ = r.o.Budget.nextCost(r.usage, r.est.Request(req), 0)
		}
	}
	if id != "" {
		if serr := r.o.Ledger.Settle(context.WithoutCancel(ctx), id, cost); serr != nil {
			r.log("error", "team budget: settle $%.4f: %v", cost, serr)
		}
	}
	return end, err
}

func (r *Runner) reserve(ctx context.Context, req *protocol.Request) (string, error) {
	if r.o.Ledger == nil {
		return "", nil
	}
	est, ok := r.o.Budget.nextCost(r.usage, r.est.Request(req), req.MaxTokens)
	if !ok && r.usage.Tokens() > 0 {
		// Calls were made and none had a cost (no prices, none
		// reported): a team budget would never stop these calls.
		if tb, err := ledger.Read(ctx, r.o.Ledger.Team); err == nil && tb.BudgetUSD > 0 {
			return "", &LimitError{Limit: LimitTeamBudget, Reason: fmt.Sprintf("%d tokens spent and the model component reports no cost, nor are the model's prices known: the team budget of $%.4f cannot be kept (give the prices in the config key models)", r.usage.Tokens(), tb.BudgetUSD)}
		}
	}
	waited := false
	defer func() {
		if waited {
			r.waiting.Store(false)
		}
	}()
	for {
		id, err := r.o.Ledger.Reserve(ctx, est)
		var busy *ledger.BusyError
		var out *ledger.ExhaustedError
		switch {
		case errors.As(err, &out):
			return "", &LimitError{Limit: LimitTeamBudget, Reason: out.Error()}
		case errors.As(err, &busy):
			if !waited {
				waited = true
				// Waiting on other workers' calls is not a stall.
				r.waiting.Store(true)
				r.log("info", "team budget: waiting for calls in flight to settle: %v", busy)
			}
			if err := sleep(ctx, budgetRetry); err != nil {
				return "", err
			}
		case err != nil:
			return "", fmt.Errorf("team budget: %w", err)
		default:
			return id, nil
		}
	}
}

// callCost is a call's cost: the component's, or at the model's prices
// when it reports none.
func (r *Runner) callCost(u protocol.Usage) float64 {
	if p := r.o.Budget.Prices; p != nil && p.Priced() {
		return max(u.CostUSD, p.Cost(u))
	}
	return u.CostUSD
}

// nextCost estimates a call of in input tokens and at most maxOut output
// tokens after spent. With the model's prices the input is priced at the
// cache-write price when dearer (a request with caching on may write its
// prompt) and the output at maxOut tokens. Without them (a model pg-llm
// does not know, a script component) it uses the cost per token seen so
// far; the first call has no estimate (ok false).
func (b Budget) nextCost(spent protocol.Usage, in, maxOut int) (usd float64, ok bool) {
	if b.Prices != nil && b.Prices.Priced() {
		return (float64(in)*max(b.Prices.InputPerMTok, b.Prices.CacheWritePerMTok) + float64(maxOut)*b.Prices.OutputPerMTok) / 1e6, true
	}
	if t := spent.Tokens(); t > 0 && spent.CostUSD > 0 {
		// Output tokens cost more than input; price the output at five
		// times the average rate.
		rate := spent.CostUSD / float64(t)
		return rate*float64(in) + 5*rate*float64(maxOut), true
	}
	return 0, false
}
