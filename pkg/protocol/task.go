package protocol

import (
	"encoding/json"
	"time"
)

// Task statuses. A pending task whose depends_on are not all done is
// reported as blocked and cannot be claimed.
const (
	StatusPending   = "pending"
	StatusClaimed   = "claimed"
	StatusDone      = "done"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Task is one entry of the team queue (DESIGN.md §3). Fields may be added,
// not renamed.
type Task struct {
	ID          string            `json:"id"`
	Title       string            `json:"title"`
	Prompt      string            `json:"prompt,omitempty"`
	Status      string            `json:"status" jsonschema:"enum=pending,enum=claimed,enum=done,enum=failed,enum=cancelled"`
	Priority    int               `json:"priority"`
	DependsOn   []string          `json:"depends_on"`
	Labels      map[string]string `json:"labels"`
	Verify      string            `json:"verify,omitempty"`
	Attempts    int               `json:"attempts"`
	MaxAttempts int               `json:"max_attempts"`
	Claim       *Claim            `json:"claim"`
	Result      json.RawMessage   `json:"result"`
	Error       *string           `json:"error"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
	// Blocked is set in listings when a dependency is not done; it is not
	// stored.
	Blocked bool `json:"blocked,omitempty"`
	// Extra holds the fields of a stored task that this version does not
	// know (added by hand, by a script or by a newer version): the queue
	// writes them back as they were.
	Extra map[string]json.RawMessage `json:"-"`
}

// TaskInput is one task as pg-queue add reads it from stdin, a line of a
// tasks file: a title or a prompt (whose first line is then the title),
// everything else optional. The fields of a task
// record that describe its state are accepted, so that listed tasks can
// be added to another team, and ignored: a new task is pending. Any other
// field is refused, as a typo.
type TaskInput struct {
	ID          string            `json:"id,omitempty" jsonschema:"description=default t-<ULID>"`
	Title       string            `json:"title,omitempty" jsonschema:"description=required unless there is a prompt\\, whose first line is then the title"`
	Prompt      string            `json:"prompt,omitempty" jsonschema:"description=what the worker should do (default: the title)"`
	Priority    int               `json:"priority,omitempty" jsonschema:"description=higher runs first (default 0)"`
	DependsOn   []string          `json:"depends_on,omitempty" jsonschema:"description=ids of tasks that must be done first: live\\, archived\\, or of the same input"`
	Labels      map[string]string `json:"labels,omitempty"`
	Verify      string            `json:"verify,omitempty" jsonschema:"description=command that must pass before the task counts as done"`
	MaxAttempts int               `json:"max_attempts,omitempty" jsonschema:"description=claims the task gets before it fails (0 or absent: 3)"`

	Status    json.RawMessage `json:"status,omitempty" jsonschema:"description=ignored: a new task is pending"`
	Attempts  json.RawMessage `json:"attempts,omitempty" jsonschema:"description=ignored"`
	Claim     json.RawMessage `json:"claim,omitempty" jsonschema:"description=ignored"`
	Result    json.RawMessage `json:"result,omitempty" jsonschema:"description=ignored"`
	Error     json.RawMessage `json:"error,omitempty" jsonschema:"description=ignored"`
	CreatedAt json.RawMessage `json:"created_at,omitempty" jsonschema:"description=ignored"`
	UpdatedAt json.RawMessage `json:"updated_at,omitempty" jsonschema:"description=ignored"`
	Blocked   json.RawMessage `json:"blocked,omitempty" jsonschema:"description=ignored"`
}

// Task is the new task the input describes.
func (in *TaskInput) Task() Task {
	return Task{ID: in.ID, Title: in.Title, Prompt: in.Prompt, Priority: in.Priority, DependsOn: in.DependsOn,
		Labels: in.Labels, Verify: in.Verify, MaxAttempts: in.MaxAttempts}
}

// Claim is a lease on a task with its fencing token.
type Claim struct {
	Worker string    `json:"worker"`
	Token  int64     `json:"token"`
	Until  time.Time `json:"until"`
	// ID is the id the claiming client chose for the claim, if any: the
	// store agent's client finds its claim again by it when the answer
	// was lost.
	ID string `json:"id,omitempty" jsonschema:"description=the id the claiming client chose for this claim (the store agent's client\\, to find it again when its answer was lost)"`
}

// Worker is the record a worker keeps in worker-<n>.json.
type Worker struct {
	Worker      string    `json:"worker"`
	PID         int       `json:"pid"`
	PIDStart    string    `json:"pid_start" jsonschema:"description=the process start time\\, to tell a reused pid"`
	PGID        int       `json:"pgid,omitempty" jsonschema:"description=the process group of pid when recorded; a watcher signals pid only while it still matches"`
	SID         int       `json:"sid,omitempty" jsonschema:"description=the session of pid when recorded; a watcher signals pid only while it still matches"`
	Host        string    `json:"host"`
	HostID      string    `json:"host_id,omitempty" jsonschema:"description=the running kernel and pid namespace that pid belongs to (a hash of the boot id and the pid namespace\\, see proc.HostID): a watcher checks or signals pid only when this is its own; a record without it only when host is its name"`
	Epoch       int       `json:"epoch"`
	State       string    `json:"state"`
	Task        string    `json:"task,omitempty"`
	Step        int       `json:"step"`
	Session     string    `json:"session,omitempty"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// HeartbeatIntervalMS is how often the worker beats, when it says:
	// a watcher refuses a stale limit shorter than twice it.
	HeartbeatIntervalMS int64     `json:"heartbeat_interval_ms,omitempty" jsonschema:"minimum=0,description=how often the worker refreshes heartbeat_at\\, in milliseconds (optional)"`
	ProgressAt          time.Time `json:"progress_at"`
	// BusyUntil is the deadline of a bounded call in progress (a verify
	// run, a turn's tool calls, within their own timeouts): a watcher
	// calls the worker stuck only once both this and progress_at plus its
	// stall limit have passed.
	BusyUntil  time.Time `json:"busy_until,omitempty,omitzero" jsonschema:"description=the deadline of a bounded call in progress (verify\\, tool calls) by their own timeouts: a watcher does not call the worker stuck before it"`
	StartedAt  time.Time `json:"started_at"`
	Usage      Usage     `json:"usage" jsonschema:"description=the usage of the worker's current process (a resumed session's earlier usage stays with the process that spent it)"`
	Spent      *Usage    `json:"spent,omitempty" jsonschema:"description=the summed usage of the worker's earlier processes (carried over by each restart); the worker's total is spent plus usage"`
	Velocity   float64   `json:"velocity"`
	Paused     bool      `json:"paused,omitempty"`
	LastTool   string    `json:"last_tool,omitempty"`
	LastError  *string   `json:"last_error"`
	LastResult string    `json:"last_result,omitempty"`
	// Approval is the tool call the worker waits on (pg-loop --ask).
	Approval *PendingApproval `json:"approval,omitempty" jsonschema:"description=a tool call waiting for approval: pg-dash's key or pg-loop approve answers it"`
}

// MaxClockSkew is how far in the future a worker's heartbeat may lie
// (clocks differ a little between hosts) before it is taken as false: a
// heartbeat dated later would keep a worker looking alive until then.
const MaxClockSkew = time.Minute

// BeatFuture reports whether the heartbeat lies more than MaxClockSkew
// after now. Such a heartbeat proves nothing: readers treat the worker as
// stale.
func (w *Worker) BeatFuture(now time.Time) bool {
	return !w.HeartbeatAt.IsZero() && w.HeartbeatAt.Sub(now) > MaxClockSkew
}

// Total is the worker's usage over all its processes: spent plus usage.
func (w *Worker) Total() Usage {
	if w.Spent == nil {
		return w.Usage
	}
	return w.Spent.Add(w.Usage)
}

// Carried is the spent of a record that replaces w for a new process:
// everything w's processes used.
func (w *Worker) Carried() *Usage {
	t := w.Total()
	if t == (Usage{}) {
		return nil
	}
	return &t
}
