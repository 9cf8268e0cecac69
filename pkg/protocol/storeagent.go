package protocol

import "encoding/json"

// StoreAgentProtocol is the version of the store agent's wire protocol
// (docs/store-agent.md). A client that reads another version in the hello
// does not use the agent.
const StoreAgentProtocol = 1

// StoreAgentHello is the first line the store agent (pg-queue agent)
// writes on a connection, before any request.
type StoreAgentHello struct {
	Type     string `json:"type" jsonschema:"enum=hello"`
	Protocol int    `json:"protocol" jsonschema:"description=the wire protocol's version (1)"`
	// Store is the kind of store the agent serves: postgres or file.
	Store string `json:"store" jsonschema:"enum=file,enum=postgres"`
	PID   int    `json:"pid" jsonschema:"description=the agent's process id"`
}

// StoreAgentRequest is one call to the store agent: one line of JSON.
// Op names the store method; the other fields are its arguments, each
// present only for the ops that take it. Several calls may be in flight on
// one connection; responses carry the id of their request and may come in
// any order. {"op":"cancel","id":N} cancels call N (wait_claim,
// follow_next): it gets no response of its own, and call N answers with
// what it had done when the cancel reached it.
type StoreAgentRequest struct {
	ID int64  `json:"id" jsonschema:"description=chosen by the client; the response carries it"`
	Op string `json:"op" jsonschema:"enum=cancel,enum=team,enum=exists,enum=add,enum=claim,enum=wait_claim,enum=renew,enum=complete,enum=fail,enum=release,enum=unclaim,enum=release_worker,enum=cancel_task,enum=cancel_all,enum=list,enum=show,enum=stats,enum=archive,enum=prune,enum=append,enum=follow,enum=follow_next,enum=follow_close,enum=worker_read,enum=worker_cas,enum=worker_write,enum=worker_list,enum=velocity,enum=set_velocity,enum=answer,enum=take_answer,enum=budget_read,enum=budget_cas"`
	// Team is the team every op but cancel and follow_* works on.
	Team   string `json:"team,omitempty"`
	Worker string `json:"worker,omitempty"`
	// Task is a task id (renew, complete, fail, release, unclaim,
	// cancel_task, show).
	Task  string `json:"task,omitempty"`
	Token int64  `json:"token,omitempty" jsonschema:"description=the claim's fencing token; release_worker: release only claims with a smaller one (0: all)"`
	// Durations are in nanoseconds.
	LeaseNS     int64           `json:"lease_ns,omitempty" jsonschema:"description=claim\\, wait_claim\\, renew: the lease (none: the default; negative: bad input)"`
	WaitNS      int64           `json:"wait_ns,omitempty"`
	OlderThanNS int64           `json:"older_than_ns,omitempty"`
	Result      json.RawMessage `json:"result,omitempty" jsonschema:"description=complete: the task's result"`
	Message     string          `json:"message,omitempty" jsonschema:"description=fail: the error; unclaim\\, release_worker\\, cancel_*: the reason"`
	Retry       bool            `json:"retry,omitempty"`
	ClaimID     string          `json:"claim_id,omitempty" jsonschema:"description=claim\\, wait_claim: an id for the claim\\, recorded with it (the task's claim.id)\\, by which the client finds its claim when the answer is lost"`
	IDs         []string        `json:"ids,omitempty" jsonschema:"description=cancel_all: the tasks"`
	// Tasks are the tasks to add, as task records.
	Tasks []json.RawMessage `json:"tasks,omitempty"`
	// Status, Archived and Worker filter list.
	Status   []string `json:"status,omitempty"`
	Archived bool     `json:"archived,omitempty"`
	// Records are the journal records to append, in order.
	Records   []json.RawMessage `json:"records,omitempty"`
	FromStart bool              `json:"from_start,omitempty"`
	// Follower is a follower's handle (from follow) for follow_next and
	// follow_close.
	Follower int64 `json:"follower,omitempty"`
	// Record is the worker record (worker_write, worker_cas) or ledger
	// (budget_cas) to write.
	Record json.RawMessage `json:"record,omitempty"`
	// Expect is what a compare-and-write expects the stored document to be,
	// exactly as worker_read or budget_read returned it (null: none): a
	// stored document that differs fails with kind conflict and changes
	// nothing.
	Expect   json.RawMessage `json:"expect,omitempty"`
	Velocity *float64        `json:"velocity,omitempty"`
	Answer   *ApprovalAnswer `json:"answer,omitempty"`
	// Call is the tool call whose answer take_answer takes.
	Call string `json:"call,omitempty"`
}

// StoreAgentResponse answers the request with the same id: a result, or
// an error.
type StoreAgentResponse struct {
	// ID is the request's. A stopping agent's last line has id 0 and the
	// error kind stopping: it did not run, and will not run, any request
	// it has not answered by then.
	ID     int64            `json:"id"`
	Result json.RawMessage  `json:"result,omitempty" jsonschema:"description=the method's result: a task\\, a list of tasks\\, stats\\, a count\\, a record\\, or absent"`
	Error  *StoreAgentError `json:"error,omitempty"`
}

// StoreAgentError is a store method's error, with what the tools map to
// exit codes kept.
type StoreAgentError struct {
	// Kind names the error the message wraps: not_found, lease_lost,
	// finished, nothing (queue errors), input (bad input to the queue, with
	// index), not_exist (no such record), no_approval, conflict (a
	// compare-and-write found another document), canceled (the client
	// cancelled the request), deadline, stopping (the agent is stopping and
	// did not run the request, or stopped it before it changed anything:
	// run it elsewhere), or empty for any other.
	Kind    string `json:"kind,omitempty" jsonschema:"enum=,enum=not_found,enum=lease_lost,enum=finished,enum=nothing,enum=input,enum=not_exist,enum=no_approval,enum=conflict,enum=canceled,enum=deadline,enum=stopping"`
	Message string `json:"message"`
	// BadInput: the error is bad input (exit 2).
	BadInput bool `json:"bad_input,omitempty"`
	Index    int  `json:"index,omitempty" jsonschema:"description=input: the offending task's position in an add batch\\, or -1"`
}
