package loop

import "github.com/powerglide/powerglide/pkg/protocol"

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
