package loop

import (
	"errors"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// charged is what a model call that ended counts against the budgets and
// the team ledger: the usage the provider reported or, when it reported
// no input tokens (many OpenAI-compatible and local servers send no usage
// in a stream, and some proxies drop it), the loop's own estimate of the
// request and of the answer, priced at the model's prices when they are
// known and marked estimated. Charging nothing would leave every budget
// open for as long as the run goes on. The first such call is logged.
func (r *Runner) charged(req *protocol.Request, end *protocol.EndEvent) protocol.Usage {
	u := end.Usage
	if u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens > 0 {
		return u
	}
	est := protocol.Usage{
		InputTokens:  r.est.Request(req),
		OutputTokens: max(u.OutputTokens, r.est.Messages([]protocol.Message{end.Message})),
		Estimated:    true,
	}
	est.CostUSD = max(u.CostUSD, r.callCost(est))
	if !r.usageEstimated {
		r.usageEstimated = true
		r.log("warn", "the provider reported no usage: budgets count estimates (about %d tokens in and %d out for this call)", est.InputTokens, est.OutputTokens)
	}
	return est
}

// chargeFailed counts what a failed model call was charged all the same:
// the usage of its error event (pg-llm's attempts whose streams were cut
// after the provider counted their input), in the run's and the task's
// usage and in the session's memory, and returns its cost for the team
// ledger. A call that failed with no usage costs nothing.
func (r *Runner) chargeFailed(err error) float64 {
	var me *ModelError
	if !errors.As(err, &me) || me.Event.Usage == nil || *me.Event.Usage == (protocol.Usage{}) {
		return 0
	}
	u := *me.Event.Usage
	if cerr := u.Check(); cerr != nil {
		r.log("warn", "model error: usage refused: %v", cerr)
		return 0
	}
	r.spend(u)
	if tr := r.cur; tr != nil {
		tr.usage = tr.usage.Add(u)
		r.remember(MemoryRecord{Type: MemCharge, Task: tr.task.ID, Usage: &u})
	}
	return r.callCost(u)
}
