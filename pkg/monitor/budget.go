package monitor

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/powerglide/powerglide/pkg/ledger"
)

// writeBudget puts the run's budget in the team's ledger (budget.json),
// where every pg-loop worker reserves a call's estimated cost before the
// call. A team that never had a budget gets no ledger; a run without one
// (0) clears an earlier run's.
func (s *Supervisor) writeBudget(ctx context.Context) error {
	t := s.W.team()
	if s.Opts.BudgetUSD == 0 {
		if _, err := ledger.Read(ctx, t); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	tb, err := ledger.SetBudget(ctx, t, s.Opts.BudgetUSD, time.Now())
	if err != nil {
		return err
	}
	if tb.BudgetUSD > 0 {
		s.logf("team budget $%.4f, $%.4f spent so far (the team's ledger)", tb.BudgetUSD, tb.SpentUSD)
	}
	return nil
}

// overBudget reports whether the team's recorded spending c calls for
// stopping every worker. Workers that settle their calls in the ledger
// (pg-loop) stop themselves before a call that could pass the budget, and
// may still finish a task that reached it exactly (its verify and commit
// cost nothing): then only spending past the budget stops them. Otherwise
// (workers that only report their cost, pg-monitor beat --cost-usd)
// reaching it does.
func (s *Supervisor) overBudget(ctx context.Context, c float64) bool {
	b := s.Opts.BudgetUSD
	if tb, err := ledger.Read(ctx, s.W.team()); err == nil && tb.Calls > 0 {
		return c > b+1e-9
	}
	return c >= b
}

// budgetRefused is the reason the ledger gave a worker for refusing a call
// during this run, or "".
func (s *Supervisor) budgetRefused(ctx context.Context) string {
	tb, err := ledger.Read(ctx, s.W.team())
	if err != nil || tb.Refused == nil || tb.Refused.At.Before(s.started) || tb.BudgetUSD == 0 {
		return ""
	}
	return "worker " + tb.Refused.Worker + ": " + tb.Refused.Reason
}

// drained reports whether the queue has nothing left to do (an error
// counts as work left).
func (s *Supervisor) drained(ctx context.Context) bool {
	st, err := s.W.Queue.Stats(ctx)
	return err == nil && st.Drained()
}
