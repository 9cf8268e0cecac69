package tool

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/powerglide/powerglide/pkg/protocol"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Terminal tools drive pg-pty sessions by running the pg-pty binary (next
// to this executable, else on PATH): start, send, read (or wait for a
// regexp), screen and kill. Sessions outlive a call, so a model can run an
// interactive program, type into it and watch the screen.

const ptyCallSlack = 30 * time.Second

// ptyBinary finds pg-pty at call time.
func ptyBinary() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "pg-pty")
		if isExecutable(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath("pg-pty")
	if err != nil {
		return "", errors.New("pg-pty is not installed: the term_* tools need the pg-pty binary next to pg-tool or on PATH")
	}
	return p, nil
}

// Each Session has a name space of its own: the session a model names
// "repl" is SCOPE.repl in pg-pty, SCOPE being the session's term scope
// (Options.TermScope, else a fresh random one). So the term_* tools reach
// only the sessions this pg-tool started (or those of the scope it was
// given), never the user's own terminal sessions or another agent's, and
// their answers say nothing about the names in use outside it.

// termScopePattern is what Options.TermScope must match: a pg-pty name
// short enough to leave room for the model's.
var termScopePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,62}$`)

// newTermScope is a scope for a session that was given none.
func newTermScope() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "pgtool-" + hex.EncodeToString(b)
}

// ptySession is the pg-pty name of the model's session name.
func (s *Session) ptySession(name string) string { return s.termScope + "." + name }

// noteTerm records that the model's session name was started (live) or
// killed.
func (s *Session) noteTerm(name string, live bool) {
	s.termMu.Lock()
	defer s.termMu.Unlock()
	if s.termLive == nil {
		s.termLive = map[string]bool{}
	}
	if live {
		s.termLive[name] = true
	} else {
		delete(s.termLive, name)
	}
}

// endTerms kills the sessions started and not killed, all at once.
func (s *Session) endTerms() {
	s.termMu.Lock()
	names := make([]string, 0, len(s.termLive))
	for n := range s.termLive {
		names = append(names, n)
	}
	s.termLive = nil
	s.termMu.Unlock()
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() { _, _ = s.runPty(context.Background(), ptyCallSlack, "kill", n) })
	}
	wg.Wait()
}

// runPty runs pg-pty's command op on the model's session name (then args)
// with --json and returns its last record: the answer, or the
// {"type":"error"} record a failed command prints, whose message becomes
// the error, in the model's names. What pg-pty writes on stderr is for
// people and is never parsed; it is only quoted when no record came.
func (s *Session) runPty(ctx context.Context, timeout time.Duration, op, name string, args ...string) ([]byte, error) {
	bin, err := ptyBinary()
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	s.mu.Lock()
	dir := filepath.Join(s.rootPath, s.cwd)
	s.mu.Unlock()
	env, own := s.ptyEnv()
	full := s.ptySession(name)
	argv := []string{op, "--json"}
	if op == "start" {
		// The program gets the commands' environment, not pg-pty's.
		argv = append(argv, "--started-by="+s.startedBy)
		for _, v := range own {
			argv = append(argv, "--unset-env="+v)
		}
	}
	argv = append(append(argv, full), args...)
	code, err := runIn(ctx, unconfined, run{timeout: timeout, dir: dir, env: env, stdout: &stdout, stderr: &stderr}, bin, argv...)
	rec := lastLine(stdout.Bytes())
	// The model knows its sessions by their short names.
	short := func(msg string) string { return strings.ReplaceAll(msg, full, name) }
	if errors.Is(err, errTimeout) {
		return rec, fmt.Errorf("pg-pty %s timed out after %s", op, timeout)
	}
	if err != nil {
		return rec, err
	}
	var head struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(rec, &head) == nil && head.Type == protocol.EventError {
		return nil, fmt.Errorf("pg-pty %s: %s", op, short(head.Message))
	}
	if code != 0 {
		err := fmt.Errorf("pg-pty %s: exit code %d", op, code)
		if msg := lastLine(stderr.Bytes()); len(msg) > 0 {
			err = fmt.Errorf("pg-pty %s: exit code %d: %s", op, code, short(string(msg)))
		}
		return rec, err
	}
	return rec, nil
}

const termNameSchema = `"name": {"type": "string", "pattern": "^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$", "description": "Session name, e.g. repl."}`

var termStartTool = &Tool{
	Name: "term_start",
	Description: `Start a program in a new pseudo-terminal session that outlives this call: interactive programs (REPLs, editors, TUIs, ssh, long-running servers).
Then use term_send to type, term_read to get output (or wait for a pattern) and term_screen to see the screen as a terminal shows it; term_kill ends it.`,
	Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    ` + termNameSchema + `,
    "command": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "Program and arguments, e.g. [\"python3\", \"-q\"]. Use [\"bash\", \"-c\", \"...\"] for a shell line."},
    "cols": {"type": "integer", "minimum": 10, "maximum": 1000, "description": "Terminal width (default 120)."},
    "rows": {"type": "integer", "minimum": 5, "maximum": 500, "description": "Terminal height (default 40)."}
  },
  "required": ["name", "command"],
  "additionalProperties": false
}`),
	Run: func(ctx context.Context, s *Session, raw json.RawMessage) (string, error) {
		var in struct {
			Name    string   `json:"name"`
			Command []string `json:"command"`
			Cols    int      `json:"cols"`
			Rows    int      `json:"rows"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return "", err
		}
		var args []string
		if in.Cols > 0 {
			args = append(args, "--cols="+strconv.Itoa(in.Cols))
		}
		if in.Rows > 0 {
			args = append(args, "--rows="+strconv.Itoa(in.Rows))
		}
		argv, err := s.sandboxed(in.Command)
		if err != nil {
			return "", err
		}
		args = append(append(args, "--"), argv...)
		if _, err := s.runPty(ctx, ptyCallSlack, "start", in.Name, args...); err != nil {
			return "", err
		}
		s.noteTerm(in.Name, true)
		return fmt.Sprintf("started session %s: %s\n", in.Name, strings.Join(in.Command, " ")), nil
	},
}

var termSendTool = &Tool{
	Name:        "term_send",
	Description: `Type into a terminal session: "text" is sent as is (include "\n" to press Enter), then "keys" are pressed in order: Enter, Tab, Esc, Backspace, Delete, Up, Down, Left, Right, Home, End, PgUp, PgDn, F1..F12, C-a..C-z (C-c is Ctrl-C), M-x (Alt-x).`,
	Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    ` + termNameSchema + `,
    "text": {"type": "string", "description": "Text to type."},
    "keys": {"type": "array", "items": {"type": "string"}, "description": "Keys to press after the text, e.g. [\"Enter\"] or [\"C-c\"]."}
  },
  "required": ["name"],
  "additionalProperties": false
}`),
	Run: func(ctx context.Context, s *Session, raw json.RawMessage) (string, error) {
		var in struct {
			Name string   `json:"name"`
			Text string   `json:"text"`
			Keys []string `json:"keys"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return "", err
		}
		if in.Text == "" && len(in.Keys) == 0 {
			return "", errors.New("nothing to send: give text, keys or both")
		}
		// Text after "--": text starting with "-" is still text, not a flag.
		var args []string
		if len(in.Keys) > 0 {
			args = append(args, "--keys="+strings.Join(in.Keys, ","))
		}
		if in.Text != "" {
			args = append(args, "--", in.Text)
		}
		if _, err := s.runPty(ctx, ptyCallSlack, "send", in.Name, args...); err != nil {
			return "", err
		}
		return fmt.Sprintf("sent to %s\n", in.Name), nil
	},
}

var termReadTool = &Tool{
	Name: "term_read",
	Description: `Read a terminal session's output since an offset (default: where the previous read ended). With "wait", wait until the output matches that regular expression or the timeout passes.
The result ends with the offset to pass as "since" next time, so each read returns only new output. For full-screen programs use term_screen instead.`,
	Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    ` + termNameSchema + `,
    "since": {"type": "integer", "minimum": 0, "description": "Byte offset to read from (the next_offset of the previous read)."},
    "wait": {"type": "string", "description": "Regular expression to wait for in the output, e.g. \"\\\\$ $\" for a prompt."},
    "timeout_ms": {"type": "integer", "minimum": 0, "maximum": 600000, "description": "How long to wait for the pattern (default 10000)."},
    "raw": {"type": "boolean", "description": "Return the bytes as the program wrote them, terminal escape sequences included (default false: escapes removed, CRLF as LF)."}
  },
  "required": ["name"],
  "additionalProperties": false
}`),
	ReadOnly: true,
	Run: func(ctx context.Context, s *Session, raw json.RawMessage) (string, error) {
		var in struct {
			Name      string `json:"name"`
			Since     *int64 `json:"since"`
			Wait      string `json:"wait"`
			TimeoutMS *int64 `json:"timeout_ms"`
			Raw       bool   `json:"raw"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return "", err
		}
		var args []string
		if !in.Raw {
			// The text the model sees, and the text "wait" is matched against.
			args = append(args, "--plain")
		}
		if in.Since != nil {
			args = append(args, "--since="+strconv.FormatInt(*in.Since, 10))
		}
		wait := time.Duration(0)
		if in.Wait != "" {
			wait = 10 * time.Second
			if in.TimeoutMS != nil {
				wait = time.Duration(*in.TimeoutMS) * time.Millisecond
			}
			args = append(args, "--wait="+in.Wait, "--timeout="+wait.String())
		}
		rec, err := s.runPty(ctx, wait+ptyCallSlack, "read", in.Name, args...)
		if err != nil && len(rec) == 0 {
			return "", err
		}
		var out struct {
			Data       string `json:"data"`
			Offset     int64  `json:"offset"`
			NextOffset int64  `json:"next_offset"`
			Matched    *bool  `json:"matched"`
			Skipped    int64  `json:"skipped"`
			OutputLost int64  `json:"output_lost"`
		}
		if jerr := json.Unmarshal(rec, &out); jerr != nil {
			if err != nil {
				return "", err
			}
			return "", fmt.Errorf("pg-pty read printed no output record: %v", jerr)
		}
		text := out.Data
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if out.Skipped > 0 {
			text = fmt.Sprintf("[%d bytes before offset %d were discarded (the session keeps only its latest output); reading from there]\n", out.Skipped, out.Offset) + text
		}
		if out.OutputLost > 0 {
			text += fmt.Sprintf("[%d bytes of the session's output could not be saved (disk full?); they are missing here]\n", out.OutputLost)
		}
		text += fmt.Sprintf("[next_offset: %d]\n", out.NextOffset)
		if in.Wait != "" && (out.Matched == nil || !*out.Matched) {
			return text, fmt.Errorf("output did not match %q within %s", in.Wait, wait)
		}
		return text, nil
	},
}

var termScreenTool = &Tool{
	Name:        "term_screen",
	Description: `Show a terminal session's screen as a terminal displays it now (rows of text and the cursor position). Best for full-screen programs (editors, top, TUIs).`,
	Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    ` + termNameSchema + `
  },
  "required": ["name"],
  "additionalProperties": false
}`),
	ReadOnly: true,
	Run: func(ctx context.Context, s *Session, raw json.RawMessage) (string, error) {
		var in struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return "", err
		}
		rec, err := s.runPty(ctx, ptyCallSlack, "screen", in.Name)
		if err != nil {
			return "", err
		}
		var scr struct {
			Cols, Rows int
			Cursor     struct{ Row, Col int }
			Lines      []string
		}
		if err := json.Unmarshal(rec, &scr); err != nil {
			return "", fmt.Errorf("pg-pty screen printed no screen record: %v", err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "[screen %dx%d, cursor at row %d col %d]\n", scr.Cols, scr.Rows, scr.Cursor.Row, scr.Cursor.Col)
		lines := scr.Lines
		for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
			lines = lines[:len(lines)-1]
		}
		for _, l := range lines {
			b.WriteString(strings.TrimRight(l, " "))
			b.WriteByte('\n')
		}
		return b.String(), nil
	},
}

var termKillTool = &Tool{
	Name:        "term_kill",
	Description: `End a terminal session and the program in it.`,
	Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    ` + termNameSchema + `
  },
  "required": ["name"],
  "additionalProperties": false
}`),
	Run: func(ctx context.Context, s *Session, raw json.RawMessage) (string, error) {
		var in struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return "", err
		}
		if _, err := s.runPty(ctx, ptyCallSlack, "kill", in.Name); err != nil {
			return "", err
		}
		s.noteTerm(in.Name, false)
		return fmt.Sprintf("killed session %s\n", in.Name), nil
	},
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}
