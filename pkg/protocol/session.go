package protocol

import "time"

// Session records: what `pg-loop sessions` lists and `pg-loop sessions
// show ID` prints.
const (
	SessionRecordType = "session"
	SessionEntryType  = "session_entry"
)

// SessionRecord is one pg-loop session, from its session.json (and, for a
// session without a task list of its own, its memory.jsonl).
type SessionRecord struct {
	Type     string         `json:"type" jsonschema:"enum=session"`
	ID       string         `json:"id"`
	Parent   string         `json:"parent,omitempty" jsonschema:"description=the session this one was forked from (--fork)"`
	Status   string         `json:"status" jsonschema:"enum=running,enum=done,enum=failed,enum=interrupted"`
	Created  time.Time      `json:"created"`
	Updated  time.Time      `json:"updated"`
	Cwd      string         `json:"cwd" jsonschema:"description=the workdir the session ran in"`
	Tasks    map[string]int `json:"tasks" jsonschema:"description=the number of the session's tasks by status"`
	Task     string         `json:"task,omitempty" jsonschema:"description=the task in progress when the session last stopped"`
	Steps    int            `json:"steps"`
	Tokens   int            `json:"tokens" jsonschema:"description=the input and output and cache tokens of every model call of the session"`
	CostUSD  float64        `json:"cost_usd"`
	Usage    Usage          `json:"usage"`
	Team     string         `json:"team,omitempty"`
	Worker   string         `json:"worker,omitempty"`
	Pipeline string         `json:"pipeline,omitempty"`
	Alive    bool           `json:"alive" jsonschema:"description=the process that last ran the session is still running"`
	PID      int            `json:"pid,omitempty"`
}

// SessionEntry is one record of a session's transcript (memory.jsonl), in
// order: a task started or ended, a message of the conversation, or a
// compaction of it.
type SessionEntry struct {
	Type      string    `json:"type" jsonschema:"enum=session_entry"`
	TS        time.Time `json:"ts"`
	Kind      string    `json:"kind" jsonschema:"enum=task,enum=message,enum=prune,enum=summary,enum=fresh,enum=charge"`
	Task      string    `json:"task,omitempty"`
	Status    string    `json:"status,omitempty" jsonschema:"description=kind task: started or done or failed"`
	Title     string    `json:"title,omitempty" jsonschema:"description=kind task when started: the task's title"`
	Follows   string    `json:"follows,omitempty" jsonschema:"description=kind task when started: the task whose conversation this one continues"`
	Message   *Message  `json:"message,omitempty"`
	Usage     *Usage    `json:"usage,omitempty"`
	Summary   string    `json:"summary,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Iteration int       `json:"iteration,omitempty"`
}
