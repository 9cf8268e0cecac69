package remote

import (
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
)

// redact hides the secrets this process knows (its environment, its
// config file's keys) in what a request asks the store to keep: task
// records, a result, a message or reason, journal records, a worker
// record or ledger, an answer. The agent's store redacts too, but with the
// secrets of the agent's own process, which were those of whichever
// command started it.
func redact(req *protocol.StoreAgentRequest) {
	for i, b := range req.Tasks {
		req.Tasks[i] = secrets.Redact(b)
	}
	for i, b := range req.Records {
		req.Records[i] = secrets.Redact(b)
	}
	req.Result = secrets.Redact(req.Result)
	req.Record = secrets.Redact(req.Record)
	req.Message = secrets.RedactString(req.Message)
	if req.Answer != nil {
		a := *req.Answer
		a.Reason = secrets.RedactString(a.Reason)
		req.Answer = &a
	}
}
