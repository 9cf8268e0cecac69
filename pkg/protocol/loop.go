package protocol

import "time"

// Loop event types: pg-loop's stdout, and logs/worker-<n>.jsonl.
const (
	LoopState      = "state"
	LoopAssistant  = "assistant"
	LoopToolCall   = "tool_call"
	LoopToolResult = "tool_result"
	LoopVerify     = "verify"
	LoopCommit     = "commit"
	LoopLimit      = "limit"
	LoopTask       = "task"
	LoopLog        = "log"
	LoopSummary    = "summary"
	LoopGuard      = "guard"
)

// LoopStateEvent is one transition of the loop's state machine.
type LoopStateEvent struct {
	Type    string    `json:"type" jsonschema:"enum=state"`
	TS      time.Time `json:"ts"`
	Worker  string    `json:"worker,omitempty"`
	Session string    `json:"session,omitempty"`
	Task    string    `json:"task,omitempty"`
	Step    int       `json:"step"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Reason  string    `json:"reason,omitempty"`
}

// LoopAssistantEvent is the model's answer of one turn.
type LoopAssistantEvent struct {
	Type     string    `json:"type" jsonschema:"enum=assistant"`
	TS       time.Time `json:"ts"`
	Task     string    `json:"task,omitempty"`
	Step     int       `json:"step"`
	Text     string    `json:"text,omitempty"`
	Thinking string    `json:"thinking,omitempty"`
	Model    string    `json:"model,omitempty"`
	Usage    Usage     `json:"usage"`
	Total    Usage     `json:"total" jsonschema:"description=usage of the whole run so far"`
}

// LoopToolCallEvent is a tool call about to run.
type LoopToolCallEvent struct {
	Type string    `json:"type" jsonschema:"enum=tool_call"`
	TS   time.Time `json:"ts"`
	Task string    `json:"task,omitempty"`
	Step int       `json:"step"`
	Call ToolCall  `json:"call"`
}

// LoopToolResultEvent is a tool call's result.
type LoopToolResultEvent struct {
	Type   string     `json:"type" jsonschema:"enum=tool_result"`
	TS     time.Time  `json:"ts"`
	Task   string     `json:"task,omitempty"`
	Step   int        `json:"step"`
	Result ToolResult `json:"result"`
}

// LoopVerifyEvent is the outcome of a verify command.
type LoopVerifyEvent struct {
	Type     string    `json:"type" jsonschema:"enum=verify"`
	TS       time.Time `json:"ts"`
	Task     string    `json:"task,omitempty"`
	Step     int       `json:"step"`
	Command  string    `json:"command"`
	OK       bool      `json:"ok"`
	ExitCode int       `json:"exit_code"`
	Output   string    `json:"output,omitempty"`
	Attempt  int       `json:"attempt"`
}

// LoopCommitEvent is a git commit made by the loop.
type LoopCommitEvent struct {
	Type    string    `json:"type" jsonschema:"enum=commit"`
	TS      time.Time `json:"ts"`
	Task    string    `json:"task,omitempty"`
	Hash    string    `json:"hash,omitempty"`
	Message string    `json:"message"`
	Skipped bool      `json:"skipped,omitempty" jsonschema:"description=true when nothing had changed"`
}

// LoopLimitEvent reports a safety limit that stopped the loop.
type LoopLimitEvent struct {
	Type  string    `json:"type" jsonschema:"enum=limit"`
	TS    time.Time `json:"ts"`
	Task  string    `json:"task,omitempty"`
	Step  int       `json:"step"`
	Limit string    `json:"limit" jsonschema:"description=steps\\, breaker\\, budget_tokens\\, budget_usd\\, iterations\\, verify\\, context"`
	// Pattern names the loop a breaker trip caught.
	Pattern string `json:"pattern,omitempty" jsonschema:"enum=same_call,enum=failures,enum=same_output,enum=cycle"`
	Reason  string `json:"reason"`
}

// LoopTaskEvent marks a task starting or ending in the loop.
type LoopTaskEvent struct {
	Type   string    `json:"type" jsonschema:"enum=task"`
	TS     time.Time `json:"ts"`
	Task   string    `json:"task"`
	Title  string    `json:"title,omitempty"`
	Status string    `json:"status" jsonschema:"description=started\\, done\\, failed\\, released\\, cancelled (pg-loop serve: a queued task a shutdown ended before it started)"`
	Reason string    `json:"reason,omitempty"`
	Usage  Usage     `json:"usage"`
}

// LoopLogEvent is a free-form diagnostic of the loop.
type LoopLogEvent struct {
	Type    string    `json:"type" jsonschema:"enum=log"`
	TS      time.Time `json:"ts"`
	Level   string    `json:"level" jsonschema:"enum=info,enum=warn,enum=error"`
	Message string    `json:"message"`
}

// LoopSummaryEvent is the last record of every run, just before the end
// marker: what the run did and where its time went. OK is true exactly
// when pg-loop exits 0.
type LoopSummaryEvent struct {
	Type      string         `json:"type" jsonschema:"enum=summary"`
	TS        time.Time      `json:"ts"`
	Session   string         `json:"session,omitempty"`
	Worker    string         `json:"worker,omitempty"`
	OK        bool           `json:"ok" jsonschema:"description=true when the run succeeded (exit 0): every task it took ended done"`
	Outcome   string         `json:"outcome" jsonschema:"enum=done,enum=failed,enum=limit,enum=idle,enum=interrupted"`
	Reason    string         `json:"reason,omitempty" jsonschema:"description=why the run did not succeed"`
	Tasks     LoopTaskCounts `json:"tasks"`
	Steps     int            `json:"steps" jsonschema:"description=model turns of this run"`
	Usage     Usage          `json:"usage" jsonschema:"description=tokens (input\\, output\\, cache) and cost of this run's model calls"`
	WallMS    int64          `json:"wall_ms"`
	ModelMS   int64          `json:"model_ms" jsonschema:"description=time waiting on the model (summaries included)"`
	ToolsMS   int64          `json:"tools_ms" jsonschema:"description=time in tool calls"`
	VerifyMS  int64          `json:"verify_ms" jsonschema:"description=time in verify commands and commits"`
	WaitMS    int64          `json:"wait_ms" jsonschema:"description=time paused by the velocity or waiting for a claimable task"`
	HarnessMS int64          `json:"harness_ms" jsonschema:"description=the rest: the loop's own work (session\\, events\\, queue\\, context window)"`
	// Resources are what pg-loop itself and each coprocess used.
	Resources []ProcessUsage `json:"resources,omitempty" jsonschema:"description=CPU time and peak memory of pg-loop itself (loop) and of each coprocess (model\\, tools)\\, from the kernel's accounting when each was waited for"`
}

// ProcessUsage is what one component of a run used, as the kernel counts
// it (getrusage): a coprocess's from its exit, its own children's
// included (pg-tool serve's commands), over every process it ran (a
// coprocess that died is started again); pg-loop's own (loop) up to the
// summary, without its children.
type ProcessUsage struct {
	Component string  `json:"component" jsonschema:"enum=loop,enum=model,enum=tools"`
	Processes int     `json:"processes" jsonschema:"description=processes counted: more than 1 when a coprocess died and was started again"`
	UserMS    float64 `json:"user_ms" jsonschema:"description=CPU time in user mode\\, milliseconds"`
	SysMS     float64 `json:"sys_ms" jsonschema:"description=CPU time in the kernel\\, milliseconds"`
	MaxRSSKB  int64   `json:"max_rss_kb" jsonschema:"description=peak resident memory\\, KiB: the largest of the processes counted (for a coprocess\\, its children's included)"`
}

// LoopTaskCounts counts the tasks a run ended, by how they ended.
type LoopTaskCounts struct {
	Done      int `json:"done"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled" jsonschema:"description=tasks taken back from this worker: lease lost\\, or cancelled in the queue"`
	Released  int `json:"released" jsonschema:"description=tasks given back unfinished (the run was interrupted or could not go on)"`
}

// LoopGuardEvent is a finding of the exfiltration guard: a tool call whose
// arguments carry a URL (or a key-shaped string) that first appeared in
// untrusted tool output, or a Markdown image from such a URL in a final
// answer.
type LoopGuardEvent struct {
	Type   string    `json:"type" jsonschema:"enum=guard"`
	TS     time.Time `json:"ts"`
	Task   string    `json:"task,omitempty"`
	Step   int       `json:"step"`
	Mode   string    `json:"mode" jsonschema:"enum=warn,enum=strict"`
	Action string    `json:"action" jsonschema:"enum=warned,enum=refused,enum=removed,description=warned: the call ran (or the image was kept); refused: the call was refused with a tool error; removed: the image was removed from the task's result"`
	Kind   string    `json:"kind" jsonschema:"enum=url,enum=secret,enum=image"`
	Tool   string    `json:"tool,omitempty" jsonschema:"description=the tool called (empty for an image in the answer)"`
	CallID string    `json:"call_id,omitempty"`
	Match  string    `json:"match" jsonschema:"description=the URL\\, or the key-shaped string (redacted in files)"`
	Source string    `json:"source" jsonschema:"description=the tool whose untrusted output showed it first"`
}
