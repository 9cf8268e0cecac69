package protocol

import "time"

// Journal record types (events.jsonl).
const (
	JournalTask    = "task"
	JournalWorker  = "worker"
	JournalMonitor = "monitor"
)

// TaskEvent records one change to the queue.
type TaskEvent struct {
	Type   string    `json:"type" jsonschema:"enum=task"`
	TS     time.Time `json:"ts"`
	Op     string    `json:"op" jsonschema:"description=add\\, claim\\, renew\\, complete\\, fail\\, release\\, cancel\\, expire\\, archive"`
	Task   string    `json:"task"`
	Worker string    `json:"worker,omitempty"`
	Token  int64     `json:"token,omitempty"`
	Status string    `json:"status,omitempty" jsonschema:"description=the task's status after the change"`
	Reason string    `json:"reason,omitempty"`
}

// WorkerEvent records a worker's state change.
type WorkerEvent struct {
	Type   string    `json:"type" jsonschema:"enum=worker"`
	TS     time.Time `json:"ts"`
	Worker string    `json:"worker"`
	Op     string    `json:"op" jsonschema:"description=start\\, state\\, pause\\, resume\\, exit\\, restart\\, stop (a SIGTERM asked for by a person\\, e.g. in pg-dash)"`
	State  string    `json:"state,omitempty"`
	PID    int       `json:"pid,omitempty"`
	Task   string    `json:"task,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Usage  *Usage    `json:"usage,omitempty" jsonschema:"description=exit: the usage of the process that ended"`
}

// MonitorEvent records an action of pg-monitor, with its reason.
type MonitorEvent struct {
	Type   string    `json:"type" jsonschema:"enum=monitor"`
	TS     time.Time `json:"ts"`
	Action string    `json:"action" jsonschema:"description=spawn\\, restart\\, sigterm\\, sigkill\\, release\\, budget_stop\\, done\\, give_up\\, not_signalled (a stale or stuck worker left running: its process carries no worker mark\\, see docs/team-dir.md)"`
	Worker string    `json:"worker,omitempty"`
	PID    int       `json:"pid,omitempty"`
	Task   string    `json:"task,omitempty"`
	Reason string    `json:"reason"`
}
