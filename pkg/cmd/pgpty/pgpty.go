// Package pgpty is the command-line grammar of pg-pty: kong commands that
// call package pty.
package pgpty

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/config"
	"github.com/powerglide/powerglide/pkg/jq"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/pty"
	"golang.org/x/term"
)

// Spec describes pg-pty.
func Spec() *cli.Spec {
	return &cli.Spec{
		Name: "pg-pty",
		Description: "Run programs under pseudo-terminals and keep sessions with interactive programs.\n" +
			"run executes one command under a terminal, streams its output and exits with its code. " +
			"start keeps a program running in a session that outlives the call: a detached holder process owns " +
			"the terminal, appends the output to $POWERGLIDE_HOME/pty/NAME/output.log, keeps the state in " +
			"session.json and takes input on a unix socket in the same directory. send types into it, read " +
			"returns new output (expect-style with --wait), screen renders the screen as a terminal shows it.\n\n" +
			"Examples:\n" +
			"  $ pg-pty run -- ls --color=auto\n" +
			"  $ pg-pty start py -- python3 -q\n" +
			"  $ pg-pty send py 'print(6*7)' --keys Enter\n" +
			"  $ pg-pty read py --wait '42'\n" +
			"  $ pg-pty kill py",
		CLI:     &CLI{},
		Schemas: []string{"pty-output"},
	}
}

// CLI is the grammar.
type CLI struct {
	cli.Common `embed:""`

	Run    RunCmd    `cmd:"" help:"Run a command under a pseudo-terminal, stream its output and exit with its code."`
	Start  StartCmd  `cmd:"" help:"Start a program in a named session that outlives this call."`
	Send   SendCmd   `cmd:"" help:"Type text and keys into a session."`
	Read   ReadCmd   `cmd:"" help:"Print a session's output from an offset; with --wait, until a pattern appears."`
	Screen ScreenCmd `cmd:"" help:"Show a session's screen as a terminal would, with the cursor position."`
	Resize ResizeCmd `cmd:"" help:"Change a session's terminal size."`
	List   ListCmd   `cmd:"" help:"List the sessions."`
	Status StatusCmd `cmd:"" help:"Show a session's state."`
	Wait   WaitCmd   `cmd:"" help:"Wait for a session's program to end and exit with its code."`
	Kill   KillCmd   `cmd:"" help:"End a session's program: its process group, then SIGKILL after a grace period."`
	Clean  CleanCmd  `cmd:"" help:"Remove ended sessions and their files."`
	Holder HolderCmd `cmd:"" hidden:"" name:"_holder" help:"Internal: the process that holds a session's terminal."`
}

// errorf maps package pty's errors to the exit-code table.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pty.ErrBadInput):
		return cli.Exit(cli.ExitUsage, err)
	case errors.Is(err, context.DeadlineExceeded):
		return cli.Exit(cli.ExitTimeout, err)
	case errors.Is(err, pty.ErrNoSession):
		return cli.Failf("no_session", "%v", err)
	case errors.Is(err, pty.ErrExists):
		return cli.Failf("exists", "%v", err)
	case errors.Is(err, pty.ErrNotRunning):
		return cli.Failf("not_running", "%v", err)
	case errors.Is(err, pty.ErrNotFound):
		return cli.Failf("not_found", "%v", err)
	}
	return err
}

// probe asks the holders of running sessions whether they answer, all at
// once, so a stopped holder shows as unresponsive rather than running.
func probe(ctx context.Context, s pty.Store, list ...*protocol.PtySession) {
	var wg sync.WaitGroup
	for _, st := range list {
		wg.Go(func() { s.Probe(ctx, st) })
	}
	wg.Wait()
}

func store(rt *cli.Runtime) (pty.Store, error) {
	home, err := rt.Home()
	if err != nil {
		return pty.Store{}, err
	}
	return pty.NewStore(home), nil
}

// size resolves --cols/--rows through the configuration (flag > env > file > default).
func size(rt *cli.Runtime) (cols, rows int, termName string, err error) {
	cfg, err := rt.Config()
	if err != nil {
		return 0, 0, "", err
	}
	cols, rows = cfg.Int("pty_cols"), cfg.Int("pty_rows")
	if cols <= 0 || rows <= 0 || cols > 10000 || rows > 10000 {
		return 0, 0, "", cli.Usagef("invalid terminal size %dx%d", cols, rows)
	}
	return cols, rows, cfg.String("pty_term"), nil
}

// childEnv is the caller's environment with TERM set for the emulated
// terminal, without the variables named in unset.
func childEnv(rt *cli.Runtime, termName string, unset ...string) []string {
	env := make([]string, 0, len(rt.IO.Env)+1)
	for _, kv := range rt.IO.Env {
		name, _, _ := strings.Cut(kv, "=")
		if name != "TERM" && !slices.Contains(unset, name) {
			env = append(env, kv)
		}
	}
	if termName != "" {
		env = append(env, "TERM="+termName)
	}
	return env
}

func encode(rt *cli.Runtime, v any) error { return jsonl.NewEncoder(rt.IO.Out).Encode(v) }

// RunCmd runs one command.
//
// Examples:
//
//	$ pg-pty run -- ls --color=auto
//	$ pg-pty run --timeout 30s --json -- make test
//	$ pg-pty run --input $'print(6*7)\n' -- python3
type RunCmd struct {
	Timeout   time.Duration `help:"End the command after this long: SIGTERM to its process group, SIGKILL after --kill-after; exit 124."`
	KillAfter time.Duration `default:"2s" help:"Grace between SIGTERM and SIGKILL when the command must end."`
	Cols      int           `config:"pty_cols" env:"POWERGLIDE_PTY_COLS" help:"Terminal width (default 80)."`
	Rows      int           `config:"pty_rows" env:"POWERGLIDE_PTY_ROWS" help:"Terminal height (default 24)."`
	Term      string        `config:"pty_term" env:"POWERGLIDE_PTY_TERM" help:"TERM for the command (default xterm-256color)."`
	Input     *string       `help:"Type this text into the terminal (then end-of-file) instead of forwarding stdin."`
	JSON      bool          `help:"Print one summary record {type:run, exit_code, signal, duration_ms, output, truncated} instead of streaming."`
	MaxOutput int           `default:"65536" help:"Most bytes of output kept in the --json summary (head and tail)."`
	Command   []string      `arg:"" passthrough:"" help:"The command and its arguments (after --)."`
}

// Run runs the command.
func (c *RunCmd) Run(rt *cli.Runtime) error {
	cols, rows, termName, err := size(rt)
	if err != nil {
		return err
	}
	cmdline := trimDashes(c.Command)
	if len(cmdline) == 0 {
		return cli.Usagef("no command given: pg-pty run -- CMD ARGS")
	}
	o := pty.RunOptions{
		Command: cmdline, Env: childEnv(rt, termName), Cols: cols, Rows: rows,
		Timeout: c.Timeout, KillGrace: c.KillAfter,
	}
	if c.Input != nil {
		o.Input = strings.NewReader(*c.Input)
	} else if rt.IO.In != nil {
		o.Input = rt.IO.In
		if f, ok := rt.IO.In.(*os.File); ok && rt.IO.InTTY {
			// A person at a terminal: pass keys through untouched, and
			// follow the window's size unless one was configured.
			fd := int(f.Fd())
			if st, err := term.MakeRaw(fd); err == nil {
				defer term.Restore(fd, st)
				o.Interactive = true
			}
			cfg, _ := rt.Config()
			if cfg.Get("pty_cols").Source == config.SourceDefault && cfg.Get("pty_rows").Source == config.SourceDefault {
				if w, h, err := term.GetSize(fd); err == nil && w > 0 && h > 0 {
					o.Cols, o.Rows = w, h
				}
				resize := make(chan [2]int, 1)
				winch := make(chan os.Signal, 1)
				signal.Notify(winch, syscall.SIGWINCH)
				defer func() { signal.Stop(winch); close(winch) }()
				go func() {
					for range winch {
						if w, h, err := term.GetSize(fd); err == nil && w > 0 && h > 0 {
							select {
							case resize <- [2]int{w, h}:
							default:
							}
						}
					}
				}()
				o.Resize = resize
			}
		}
	}
	if c.JSON {
		o.Capture = c.MaxOutput
	} else {
		o.Output = rt.IO.Out
	}
	stop := make(chan syscall.Signal, 1)
	o.Stop = stop
	go func() {
		<-rt.Ctx.Done()
		var se *cli.SignalError
		if errors.As(context.Cause(rt.Ctx), &se) {
			stop <- se.Signal
		}
	}()
	res, err := pty.Run(context.Background(), o)
	if err != nil {
		return mapErr(err)
	}
	if c.JSON {
		rec := protocol.PtyRun{
			Type: "run", Command: cmdline, ExitCode: res.ExitCode, TimedOut: res.TimedOut,
			DurationMS: res.Duration.Milliseconds(), Output: res.Output, OutputBytes: res.OutputBytes, Truncated: res.Truncated,
		}
		if res.Signal != "" {
			rec.Signal = &res.Signal
		}
		if err := encode(rt, rec); err != nil {
			return err
		}
	}
	if res.TimedOut {
		fmt.Fprintf(rt.IO.Err, "pg-pty: error: %s timed out after %s\n", cmdline[0], c.Timeout)
	}
	if res.ExitCode != 0 {
		return cli.Silent(res.ExitCode)
	}
	return nil
}

func trimDashes(args []string) []string {
	if len(args) > 0 && args[0] == "--" {
		return args[1:]
	}
	return args
}

// StartCmd starts a session.
//
// Examples:
//
//	$ pg-pty start sh -- bash -i
//	$ pg-pty start py --cols 120 -- python3
//	$ pg-pty start --started-by 'my-agent (pid 4242)' --unset-env POWERGLIDE_HOME repl -- python3
type StartCmd struct {
	Name string `arg:"" help:"Session name: letters, digits, '.', '_' and '-'."`
	// StartedBy: programs that start sessions for others (pg-tool's term_* tools) say so.
	StartedBy string   `name:"started-by" help:"Who starts the session, shown by list and status (started_by), e.g. 'pg-tool serve (pid 4242)'." placeholder:"TEXT"`
	UnsetEnv  []string `name:"unset-env" help:"Leave the variable NAME out of the program's environment, as env -u does (repeatable): e.g. POWERGLIDE_HOME, which pg-pty needs to find its sessions and the program does not." placeholder:"NAME"`
	Cols      int      `config:"pty_cols" env:"POWERGLIDE_PTY_COLS" help:"Terminal width (default 80)."`
	Rows      int      `config:"pty_rows" env:"POWERGLIDE_PTY_ROWS" help:"Terminal height (default 24)."`
	Term      string   `config:"pty_term" env:"POWERGLIDE_PTY_TERM" help:"TERM for the program (default xterm-256color)."`
	Dir       string   `short:"C" help:"Working directory of the program (default the current one)." type:"existingdir"`
	// MaxOutput: resolved through the config (pty_max_output).
	MaxOutput int64    `name:"max-output" config:"pty_max_output" env:"POWERGLIDE_PTY_MAX_OUTPUT" help:"Cap in bytes on the session's output.log (default 67108864, 64 MiB): past it the oldest output is discarded, so about the last this many bytes stay readable; offsets stay valid (0: no cap)." placeholder:"BYTES"`
	JSON      bool     `help:"Print the session record as JSON, and an error as a {type:error} record."`
	Command   []string `arg:"" passthrough:"" help:"The command and its arguments (after --)."`
}

// Run starts the session.
func (c *StartCmd) Run(rt *cli.Runtime) error {
	rt.JSON = c.JSON // an error is a record too
	cols, rows, termName, err := size(rt)
	if err != nil {
		return err
	}
	s, err := store(rt)
	if err != nil {
		return err
	}
	cmdline := trimDashes(c.Command)
	if len(cmdline) == 0 {
		return cli.Usagef("no command given: pg-pty start NAME -- CMD ARGS")
	}
	dir := c.Dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find pg-pty itself: %w", err)
	}
	cfg, err := rt.Config()
	if err != nil {
		return err
	}
	maxOut := int64(cfg.Int("pty_max_output"))
	if maxOut == 0 {
		maxOut = -1 // 0 in the configuration means no cap
	}
	st, err := s.Start(pty.StartOptions{
		Name: c.Name, Command: cmdline, Dir: dir, Env: childEnv(rt, termName, c.UnsetEnv...), StartedBy: c.StartedBy,
		Cols: cols, Rows: rows, MaxOutput: maxOut,
		// argv[0] stays the tool's name: test harnesses dispatch on it.
		Holder: pty.HolderExec{Path: self, Args: []string{rt.Spec.Name, HolderArg}},
	})
	if err != nil {
		return mapErr(err)
	}
	return printSession(rt, c.JSON, st, fmt.Sprintf("started %s (pid %d)", st.Name, st.PID))
}

func printSession(rt *cli.Runtime, forced bool, st *protocol.PtySession, text string) error {
	if rt.IO.JSON(forced) {
		rt.JSON = true
		return encode(rt, st)
	}
	_, err := fmt.Fprintln(rt.IO.Out, text)
	return err
}

// SendCmd types into a session.
//
// Examples:
//
//	$ pg-pty send sh 'ls -l' --keys Enter
//	$ pg-pty send sh --keys C-c
//	$ pg-pty send vi --keys Esc,:,w,q,Enter
type SendCmd struct {
	Name  string   `arg:"" help:"Session name."`
	Text  string   `arg:"" optional:"" help:"Text to type, as is (use --keys Enter, or --enter, to press Enter)."`
	Keys  []string `help:"Keys to press after the text, comma-separated: Enter, Tab, Esc, Up, Down, Left, Right, Home, End, PgUp, PgDn, Backspace, Delete, F1..F12, C-a..C-z, M-x, or one character."`
	Enter bool     `short:"e" help:"Press Enter after the text and keys."`
	JSON  bool     `help:"Print nothing on success, and an error as a {type:error} record on stdout too."`
}

// Run sends the text and keys.
func (c *SendCmd) Run(rt *cli.Runtime) error {
	rt.JSON = c.JSON
	s, err := store(rt)
	if err != nil {
		return err
	}
	keys := c.Keys
	if c.Enter {
		keys = append(keys, "Enter")
	}
	return mapErr(s.Send(rt.Ctx, c.Name, []byte(c.Text), keys))
}

// ReadCmd reads a session's output.
//
// Without --since, reading starts where the previous read of the session
// ended. With --wait, the command blocks until the pattern (a Go regular
// expression over the raw output, escape sequences included) appears after
// the offset; the data then ends right after the match, so the next read
// continues from there. It exits 124 when --timeout passes first and 1 when
// the program ends first, printing the output read so far either way.
//
// Examples:
//
//	$ pg-pty read sh
//	$ pg-pty read sh --since 0 --json
//	$ pg-pty read py --wait '>>> $' --timeout 10s --json
type ReadCmd struct {
	Name    string        `arg:"" help:"Session name."`
	Since   *int64        `help:"Byte offset in the output to read from (default: where the last read ended)."`
	Wait    string        `help:"Block until this regular expression matches the output after the offset."`
	Timeout time.Duration `default:"30s" help:"How long --wait waits."`
	Max     int           `default:"1048576" help:"Most bytes to return without --wait."`
	Plain   bool          `help:"Print the text without terminal escape sequences (CRLF as LF), and match --wait against that text, as a person reads the output; offsets stay byte offsets into output.log."`
	JSON    bool          `help:"Print one record {type:output, name, data, offset, next_offset, matched}, or a {type:error} record when there is no output."`
}

// Run reads.
func (c *ReadCmd) Run(rt *cli.Runtime) error {
	rt.JSON = c.JSON // an error before any output is a record
	s, err := store(rt)
	if err != nil {
		return err
	}
	o := pty.ReadOptions{Timeout: c.Timeout, Max: c.Max, Plain: c.Plain}
	if c.Since != nil {
		o.Since, o.HasSince = *c.Since, true
	}
	if c.Wait != "" {
		re, err := regexp.Compile(c.Wait)
		if err != nil {
			return cli.Usagef("--wait: %v", err)
		}
		o.Wait = re
	}
	out, rerr := s.Read(rt.Ctx, c.Name, o)
	if out == nil {
		return mapErr(rerr)
	}
	if out.Skipped > 0 {
		fmt.Fprintf(rt.IO.Err, "pg-pty: warning: %d bytes after offset %d were discarded by the output cap; reading from %d\n", out.Skipped, out.Offset-out.Skipped, out.Offset)
	}
	if out.OutputLost > 0 {
		fmt.Fprintf(rt.IO.Err, "pg-pty: warning: %d bytes of the session's output could not be saved (see pg-pty status %s)\n", out.OutputLost, c.Name)
	}
	if c.JSON {
		if err := encode(rt, out); err != nil {
			return err
		}
		// The record above is the answer; the error goes to stderr only,
		// so stdout stays one line.
		rt.JSON = false
	} else if _, err := fmt.Fprint(rt.IO.Out, out.Data); err != nil {
		return err
	}
	return mapErr(rerr)
}

// ScreenCmd renders a session's screen.
//
// Examples:
//
//	$ pg-pty screen vi
//	$ pg-pty screen vi --json | jq -r '.lines[]'
type ScreenCmd struct {
	Name string `arg:"" help:"Session name."`
	JSON bool   `help:"Print one record {type:screen, name, cols, rows, cursor:{row,col}, lines}, or a {type:error} record."`
}

// Run prints the screen.
func (c *ScreenCmd) Run(rt *cli.Runtime) error {
	rt.JSON = c.JSON
	s, err := store(rt)
	if err != nil {
		return err
	}
	scr, err := s.Screen(rt.Ctx, c.Name)
	if err != nil {
		return mapErr(err)
	}
	if c.JSON {
		return encode(rt, scr)
	}
	lines := scr.Lines
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for _, l := range lines {
		fmt.Fprintln(rt.IO.Out, l)
	}
	if rt.IO.OutTTY {
		fmt.Fprintf(rt.IO.Err, "[%dx%d, cursor at row %d col %d]\n", scr.Cols, scr.Rows, scr.Cursor.Row, scr.Cursor.Col)
	}
	return nil
}

// ResizeCmd resizes a session's terminal.
//
// Example:
//
//	$ pg-pty resize vi --cols 132 --rows 43
type ResizeCmd struct {
	Name string `arg:"" help:"Session name."`
	Cols int    `required:"" help:"New width in columns."`
	Rows int    `required:"" help:"New height in rows."`
	JSON bool   `help:"Print the session record as JSON."`
}

// Run resizes.
func (c *ResizeCmd) Run(rt *cli.Runtime) error {
	s, err := store(rt)
	if err != nil {
		return err
	}
	st, err := s.Resize(rt.Ctx, c.Name, c.Cols, c.Rows)
	if err != nil {
		return mapErr(err)
	}
	return printSession(rt, c.JSON, st, fmt.Sprintf("%s: %dx%d", st.Name, st.Cols, st.Rows))
}

// ListCmd lists sessions.
//
// Examples:
//
//	$ pg-pty list
//	$ pg-pty list --jq 'select(.status == "running") | .name' -r
type ListCmd struct {
	JSON bool   `help:"Print one session record per line."`
	Jq   string `help:"Apply a jq filter to each session record (in-process, gojq); each result is printed as a JSON line." placeholder:"EXPR"`
	Raw  bool   `short:"r" help:"With --jq, print string results as plain text, like jq -r."`
}

// Run lists.
func (c *ListCmd) Run(rt *cli.Runtime) error {
	filter, err := jq.New(c.Jq, c.Raw, rt.IO.Out, jsonl.NewEncoder(rt.IO.Out))
	if err != nil {
		return err
	}
	s, err := store(rt)
	if err != nil {
		return err
	}
	list, err := s.List()
	if err != nil {
		return err
	}
	probe(rt.Ctx, s, list...)
	if filter.Active() || rt.IO.JSON(c.JSON) {
		rt.JSON = true
		for _, st := range list {
			if err := filter.Emit(rt.Ctx, st); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(rt.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tPID\tSIZE\tOUTPUT\tSTARTED BY\tCOMMAND")
	for _, st := range list {
		status := st.Status
		if st.ExitCode != nil {
			status = fmt.Sprintf("%s(%d)", status, *st.ExitCode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%dx%d\t%d\t%s\t%s\n", st.Name, status, st.PID, st.Cols, st.Rows, st.OutputBytes, cmp.Or(st.StartedBy, "-"), strings.Join(st.Command, " "))
	}
	return tw.Flush()
}

// StatusCmd shows one session.
//
// A session whose holder process died without recording the program's end
// shows as dead; one whose holder lives but does not answer (stopped,
// hung), as unresponsive.
//
// Examples:
//
//	$ pg-pty status sh
//	$ pg-pty status sh --json | jq .status
type StatusCmd struct {
	Name string `arg:"" help:"Session name."`
	JSON bool   `help:"Print the session record as JSON."`
}

// Run shows the state.
func (c *StatusCmd) Run(rt *cli.Runtime) error {
	s, err := store(rt)
	if err != nil {
		return err
	}
	st, err := s.Load(c.Name)
	if err != nil {
		return mapErr(err)
	}
	probe(rt.Ctx, s, st)
	if rt.IO.JSON(c.JSON) {
		rt.JSON = true
		return encode(rt, st)
	}
	tw := tabwriter.NewWriter(rt.IO.Out, 0, 4, 1, ' ', 0)
	fmt.Fprintf(tw, "name:\t%s\n", st.Name)
	fmt.Fprintf(tw, "status:\t%s\n", st.Status)
	if st.ExitCode != nil {
		fmt.Fprintf(tw, "exit code:\t%d\n", *st.ExitCode)
	}
	if st.Signal != nil {
		fmt.Fprintf(tw, "signal:\t%s\n", *st.Signal)
	}
	fmt.Fprintf(tw, "command:\t%s\n", strings.Join(st.Command, " "))
	fmt.Fprintf(tw, "dir:\t%s\n", st.Dir)
	if st.StartedBy != "" {
		fmt.Fprintf(tw, "started by:\t%s\n", st.StartedBy)
	}
	fmt.Fprintf(tw, "pid:\t%d (holder %d)\n", st.PID, st.HolderPID)
	fmt.Fprintf(tw, "size:\t%dx%d\n", st.Cols, st.Rows)
	fmt.Fprintf(tw, "output:\t%d bytes\n", st.OutputBytes)
	if st.OutputMax > 0 {
		fmt.Fprintf(tw, "output cap:\t%d bytes; kept from offset %d\n", st.OutputMax, st.OutputStart)
	}
	if st.OutputLost > 0 || st.OutputError != "" {
		fmt.Fprintf(tw, "output lost:\t%d bytes: %s\n", st.OutputLost, st.OutputError)
	}
	for _, e := range st.Errors {
		fmt.Fprintf(tw, "error:\t%s\n", e)
	}
	fmt.Fprintf(tw, "created:\t%s\n", st.CreatedAt)
	if st.ExitedAt != nil {
		fmt.Fprintf(tw, "exited:\t%s\n", *st.ExitedAt)
	}
	return tw.Flush()
}

// WaitCmd waits for a session's program.
//
// Exits with the program's code (128+n when signal n killed it), 124 when
// --timeout passes first, and 1 when the session is dead (its holder died,
// so the program's end is unknown).
//
// Examples:
//
//	$ pg-pty wait build; echo $?
//	$ pg-pty wait build --timeout 5m --json
type WaitCmd struct {
	Name    string        `arg:"" help:"Session name."`
	Timeout time.Duration `help:"Give up after this long (exit 124); 0 waits for ever."`
	JSON    bool          `help:"Print the final session record as JSON."`
}

// Run waits.
func (c *WaitCmd) Run(rt *cli.Runtime) error {
	s, err := store(rt)
	if err != nil {
		return err
	}
	ctx := rt.Ctx
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	st, err := s.Wait(ctx, c.Name)
	if err != nil {
		if st != nil && errors.Is(err, context.DeadlineExceeded) {
			return cli.Exit(cli.ExitTimeout, fmt.Errorf("session %s still running after %s", c.Name, c.Timeout))
		}
		return mapErr(err)
	}
	if c.JSON {
		rt.JSON = true
		if err := encode(rt, st); err != nil {
			return err
		}
	}
	if st.Status == protocol.PtyDead {
		return cli.Failf("dead", "session %s is dead: its holder process (pid %d) is gone, the program's exit status is unknown", st.Name, st.HolderPID)
	}
	if st.ExitCode != nil && *st.ExitCode != 0 {
		return cli.Silent(*st.ExitCode)
	}
	return nil
}

// KillCmd ends a session's program.
//
// The signal goes to the program's process group (and the other process
// groups of its terminal session, such as a shell's jobs). When the program
// has not ended after --grace, SIGKILL follows. The holder then records the
// end and exits; the session's files stay for inspection until clean.
//
// Examples:
//
//	$ pg-pty kill sh
//	$ pg-pty kill sh --signal KILL
type KillCmd struct {
	Name   string        `arg:"" help:"Session name."`
	Signal string        `default:"HUP" help:"Signal to send first: a name (HUP, TERM, INT, KILL) or a number."`
	Grace  time.Duration `default:"2s" help:"How long to wait before SIGKILL."`
	JSON   bool          `help:"Print the final session record as JSON, and an error as a {type:error} record."`
}

// Run kills.
func (c *KillCmd) Run(rt *cli.Runtime) error {
	rt.JSON = c.JSON
	sig, err := pty.ParseSignal(c.Signal)
	if err != nil {
		return cli.Usagef("--signal: %v", err)
	}
	s, err := store(rt)
	if err != nil {
		return err
	}
	st, err := s.Kill(rt.Ctx, c.Name, sig, c.Grace)
	if err != nil {
		return mapErr(err)
	}
	text := fmt.Sprintf("%s: %s", st.Name, st.Status)
	if st.Signal != nil {
		text += " (" + *st.Signal + ")"
	} else if st.ExitCode != nil {
		text += fmt.Sprintf(" (code %d)", *st.ExitCode)
	}
	return printSession(rt, c.JSON, st, text)
}

// CleanCmd removes ended sessions.
//
// Examples:
//
//	$ pg-pty clean
//	$ pg-pty clean sh --force
type CleanCmd struct {
	Names []string `arg:"" optional:"" help:"Sessions to remove (default: every session that is not running)."`
	Force bool     `help:"Kill running sessions first instead of refusing."`
}

// Run removes the sessions and prints their names.
func (c *CleanCmd) Run(rt *cli.Runtime) error {
	s, err := store(rt)
	if err != nil {
		return err
	}
	removed, err := s.Clean(rt.Ctx, c.Names, c.Force)
	for _, n := range removed {
		fmt.Fprintln(rt.IO.Out, n)
	}
	return mapErr(err)
}

// HolderCmd is the detached process start spawns.
type HolderCmd struct {
	Dir string `arg:"" help:"Session directory."`
}

// Run holds the session until its program ends.
func (c *HolderCmd) Run(rt *cli.Runtime) error {
	return hold(rt.Ctx, c.Dir, rt.IO.In, rt.IO.Err)
}

// HolderArg is the hidden command start runs the holder with.
const HolderArg = "_holder"

// Holder runs the holder process without parsing a command line: start
// spawns it as `pg-pty _holder DIR`, and skipping kong and the
// configuration brings it up sooner, which start waits for. It returns the
// exit code.
func Holder(dir string, in io.Reader, errw io.Writer) int {
	ctx, stop := cli.SignalContext(context.Background())
	defer stop()
	if err := hold(ctx, dir, in, errw); err != nil {
		fmt.Fprintf(errw, "pg-pty: error: %v\n", err)
		return cli.ExitCode(err)
	}
	return cli.ExitOK
}

// hold holds the session until its program ends. The session spec arrives
// on in; readiness goes to file descriptor 3.
func hold(ctx context.Context, dir string, in io.Reader, errw io.Writer) error {
	// The program must not inherit the pipe: start reads it to its end.
	if err := syscall.SetNonblock(3, false); err != nil {
		return cli.Usagef("no readiness pipe on file descriptor 3: %v", err)
	}
	syscall.CloseOnExec(3)
	ready := os.NewFile(3, "ready")
	// The holder has no terminal; a stray hangup must not orphan the
	// program. (Caught, not ignored: an ignored signal stays ignored in
	// the program it starts.)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return pty.Hold(ctx, dir, in, ready, errw)
}
