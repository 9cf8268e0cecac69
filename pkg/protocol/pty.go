package protocol

// Records pg-pty prints (DESIGN.md §4, pg-pty). pg-tool's terminal tools
// exec pg-pty and read these, so their fields are a contract.

// PtyRun is the one summary `pg-pty run --json` prints.
type PtyRun struct {
	Type        string   `json:"type" jsonschema:"enum=run"`
	Command     []string `json:"command"`
	ExitCode    int      `json:"exit_code" jsonschema:"description=the child's exit code; 128+n when signal n killed it; 124 on timeout"`
	Signal      *string  `json:"signal" jsonschema:"description=the signal that ended the child (e.g. SIGKILL)\\, or null"`
	TimedOut    bool     `json:"timed_out"`
	DurationMS  int64    `json:"duration_ms"`
	Output      string   `json:"output" jsonschema:"description=the terminal output\\, head and tail kept when it is longer than the cap"`
	OutputBytes int64    `json:"output_bytes"`
	Truncated   bool     `json:"truncated"`
}

// PtyOutput is what `pg-pty read` returns: the output of a session from
// offset to next_offset (byte offsets into output.log).
type PtyOutput struct {
	Type       string `json:"type" jsonschema:"enum=output"`
	Name       string `json:"name"`
	Data       string `json:"data"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset"`
	Matched    bool   `json:"matched" jsonschema:"description=--wait: the pattern was found and data ends with the match"`
	Skipped    int64  `json:"skipped,omitempty" jsonschema:"description=bytes after the requested offset that the output cap had discarded: data starts at offset"`
	OutputLost int64  `json:"output_lost,omitempty" jsonschema:"description=bytes of the session's output that could not be written to output.log (see pg-pty status)"`
}

// PtyCursor is a cursor position, zero-based.
type PtyCursor struct {
	Row int `json:"row"`
	Col int `json:"col"`
}

// PtyScreen is a session's screen as a terminal shows it.
type PtyScreen struct {
	Type   string    `json:"type" jsonschema:"enum=screen"`
	Name   string    `json:"name"`
	Cols   int       `json:"cols"`
	Rows   int       `json:"rows"`
	Cursor PtyCursor `json:"cursor"`
	Lines  []string  `json:"lines" jsonschema:"description=one string per row\\, trailing blanks removed"`
}

// Session statuses.
const (
	PtyRunning = "running"
	PtyExited  = "exited"
	PtyDead    = "dead" // the holder process is gone without recording an exit
	// PtyUnresponsive: the holder lives but does not answer (stopped or
	// hung). Only status and list report it; session.json never holds it.
	PtyUnresponsive = "unresponsive"
)

// PtySession is a session's state: session.json, and what `pg-pty status`
// and `pg-pty list` print.
type PtySession struct {
	Type        string   `json:"type" jsonschema:"enum=session"`
	Name        string   `json:"name"`
	Status      string   `json:"status" jsonschema:"enum=running,enum=exited,enum=dead,enum=unresponsive"`
	Command     []string `json:"command"`
	Dir         string   `json:"dir" jsonschema:"description=the program's working directory"`
	StartedBy   string   `json:"started_by,omitempty" jsonschema:"description=who started the session when a program did (pg-pty start --started-by)\\, e.g. pg-tool serve (pid 4242): pg-tool's term_* tools name their sessions SCOPE.NAME and reach only those of their own scope"`
	PID         int      `json:"pid"`
	PIDStart    string   `json:"pid_start"`
	HolderPID   int      `json:"holder_pid"`
	HolderStart string   `json:"holder_start"`
	Cols        int      `json:"cols"`
	Rows        int      `json:"rows"`
	ExitCode    *int     `json:"exit_code" jsonschema:"description=once exited: the exit code\\, 128+n for signal n"`
	Signal      *string  `json:"signal"`
	CreatedAt   string   `json:"created_at"`
	ExitedAt    *string  `json:"exited_at"`
	OutputBytes int64    `json:"output_bytes,omitempty" jsonschema:"description=size of output.log (status and list only): every byte the program printed\\, kept or discarded"`
	OutputMax   int64    `json:"output_max,omitempty" jsonschema:"description=the cap on output.log: about this many of the latest bytes are kept on disk; older ones are discarded (0: no cap)"`
	OutputStart int64    `json:"output_start,omitempty" jsonschema:"description=the first offset of output.log still kept: the output before it was discarded by the cap (the file keeps its size and offsets; the discarded part reads as zeros)"`
	OutputLost  int64    `json:"output_lost,omitempty" jsonschema:"description=bytes of output that could not be written to output.log (a full disk\\, a file size limit): read never returns them"`
	OutputError string   `json:"output_error,omitempty" jsonschema:"description=the first error writing output.log"`
	Errors      []string `json:"errors,omitempty" jsonschema:"description=other writes the holder could not make: terminal replies\\, the final screen.json (at most 10)"`
}

// PtyOutputs are the records pg-pty prints.
var PtyOutputs = family("pty-output", map[string]func() any{
	"run":      func() any { return &PtyRun{} },
	"output":   func() any { return &PtyOutput{} },
	"screen":   func() any { return &PtyScreen{} },
	"session":  func() any { return &PtySession{} },
	EventError: func() any { return &ErrorEvent{} },
})
