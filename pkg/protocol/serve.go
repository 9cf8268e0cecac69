package protocol

import "time"

// LoopApproval is the loop event of a tool call that needs approval
// (pg-loop --ask): first with status pending, then with how it was
// answered.
const LoopApproval = "approval"

// LoopReply is pg-loop serve's answer to a command.
const LoopReply = "reply"

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
)

// LoopApprovalEvent is a tool call that matched an --ask pattern: pending
// while it waits for an answer (pg-loop serve's approve or deny, pg-dash's
// key, pg-loop approve for a team worker), then approved or denied. A
// denied call is not run: the model reads why in its tool result.
type LoopApprovalEvent struct {
	Type    string    `json:"type" jsonschema:"enum=approval"`
	TS      time.Time `json:"ts"`
	Worker  string    `json:"worker,omitempty"`
	Task    string    `json:"task,omitempty"`
	Step    int       `json:"step"`
	Call    ToolCall  `json:"call" jsonschema:"description=the call waiting; answer it by call.id"`
	Pattern string    `json:"pattern" jsonschema:"description=the --ask pattern it matched"`
	Status  string    `json:"status" jsonschema:"enum=pending,enum=approved,enum=denied"`
	Reason  string    `json:"reason,omitempty" jsonschema:"description=why it was denied (given with the answer\\, or: nobody can answer in a non-interactive run)"`
}

// PendingApproval is the call a team worker waits on, in its worker
// record (worker-<n>.json): pg-dash shows it, and its key or
// `pg-loop approve --team T WORKER CALL` answers it.
type PendingApproval struct {
	Call    string    `json:"call" jsonschema:"description=the call's id"`
	Tool    string    `json:"tool"`
	Input   string    `json:"input" jsonschema:"description=the call's input as JSON (cut to 2000 characters)"`
	Pattern string    `json:"pattern"`
	Task    string    `json:"task,omitempty"`
	Since   time.Time `json:"since"`
}

// ApprovalAnswer answers a team worker's pending approval: what
// `pg-loop approve` (or pg-dash) stores in the team's store
// (worker-<n>.approval in the team directory, the worker's row on
// PostgreSQL), and the worker takes.
type ApprovalAnswer struct {
	Type     string    `json:"type" jsonschema:"enum=approval_answer"`
	Worker   string    `json:"worker"`
	Call     string    `json:"call"`
	Approved bool      `json:"approved"`
	Reason   string    `json:"reason,omitempty"`
	By       string    `json:"by,omitempty" jsonschema:"description=who answered: pg-loop approve\\, pg-dash"`
	TS       time.Time `json:"ts"`
}

// Serve command types: what pg-loop serve reads, one JSON object a line.
const (
	CmdPrompt   = "prompt"
	CmdFollowUp = "follow_up"
	CmdSteer    = "steer"
	CmdAbort    = "abort"
	CmdApprove  = "approve"
	CmdDeny     = "deny"
	CmdState    = "state"
	CmdShutdown = "shutdown"
)

// ServeCommand is one line of pg-loop serve's stdin.
type ServeCommand struct {
	Type string `json:"type" jsonschema:"enum=prompt,enum=follow_up,enum=steer,enum=abort,enum=approve,enum=deny,enum=state,enum=shutdown"`
	ID   string `json:"id,omitempty" jsonschema:"description=echoed in the reply"`
	// Message is the text of prompt, follow_up and steer.
	Message string `json:"message,omitempty"`
	// Verify is a check for the task of a prompt or follow_up (as --verify).
	Verify string `json:"verify,omitempty"`
	// Call is the id of the call approve and deny answer.
	Call   string `json:"call,omitempty"`
	Reason string `json:"reason,omitempty" jsonschema:"description=deny: why\\, for the model"`
}

// ServeReply answers one command of pg-loop serve, by its id.
type ServeReply struct {
	Type    string      `json:"type" jsonschema:"enum=reply"`
	TS      time.Time   `json:"ts"`
	ID      string      `json:"id,omitempty"`
	Command string      `json:"command"`
	OK      bool        `json:"ok"`
	Error   string      `json:"error,omitempty"`
	Task    string      `json:"task,omitempty" jsonschema:"description=prompt and follow_up: the id of the task made"`
	State   *ServeState `json:"state,omitempty" jsonschema:"description=the state command's answer"`
}

// ServeState is the state of a pg-loop serve session.
type ServeState struct {
	Session   string              `json:"session,omitempty"`
	State     string              `json:"state" jsonschema:"description=the loop's state (idle\\, pick_task while waiting for a prompt\\, thinking\\, ...)"`
	Busy      bool                `json:"busy" jsonschema:"description=a task is running"`
	Task      string              `json:"task,omitempty"`
	Step      int                 `json:"step"`
	Queued    int                 `json:"queued" jsonschema:"description=follow-ups waiting for the current task to end"`
	Steering  int                 `json:"steering" jsonschema:"description=steer messages waiting for the next model call"`
	Approvals []LoopApprovalEvent `json:"approvals" jsonschema:"description=calls waiting for approve or deny"`
	Usage     Usage               `json:"usage"`
}
