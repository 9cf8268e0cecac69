package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/powerglide/powerglide/pkg/config"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// Version is the powerglide version, set at build time with
// -ldflags "-X github.com/powerglide/powerglide/pkg/cli.Version=v1.2.3".
var Version = ""

// VersionString is the version the tools report: Version, else the
// module's version from the build, else "dev".
func VersionString() string { return version() }

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// Spec describes one binary.
type Spec struct {
	Name        string // e.g. "pg-queue"
	Description string // first line: summary; the rest: details for --help and the man page
	CLI         any    // pointer to the kong grammar; embed Common in it
	Schemas     []string
	Options     []kong.Option
	// Default, when set, returns the grammar of the default command
	// alone (with Common): Run parses with it when no argument names
	// another command of CLI or asks for help. kong builds a grammar by
	// reflection, interpolating every help text: for pg-loop, whose serve
	// repeats run's flags, half its work before anything runs.
	Default func() any
	// Waits marks a tool that spends its life waiting on pipes and
	// sockets (pg-loop, pg-llm), with a small heap: Main runs its
	// goroutines on one processor (GOMAXPROCS=1), and collects garbage
	// when the heap has grown by half (GOGC=50) while the live heap is
	// small (tuneGC), each unless the environment sets it. A step of an
	// agent hands each reply from goroutine to goroutine; on one
	// processor that is a switch within a thread, not a wake-up of
	// another (200 steps: 40% fewer context switches). And a heap of a
	// few MB is mostly garbage between two collections (200 steps: peak
	// RSS of pg-llm serve 14.7 -> 13.2 MB, of pg-loop 17.2 -> 16.3 MB,
	// CPU unchanged; issue 21).
	Waits bool
}

// Runtime is bound into every command's Run method.
type Runtime struct {
	Ctx  context.Context
	IO   *IO
	Spec *Spec
	// JSON, when set by the command, makes errors also go to stdout as an
	// {"type":"error"} record. It starts as the value of a --json flag.
	JSON bool
	kong *kong.Kong
	kctx *kong.Context
	cfg  *config.Config
	pipe chan os.Signal // see CatchBrokenPipe
	done []func()       // see Defer
}

// Defer runs fn when the command has returned, after its error is
// reported: for what the command opened and its callers share (a store's
// connections). The last one deferred runs first.
func (r *Runtime) Defer(fn func()) { r.done = append(r.done, fn) }

// CatchBrokenPipe makes, for the rest of the run, a write to a stdout whose
// reader went away fail with EPIPE, an error the command sees, instead of
// ending the process with SIGPIPE (Go's default for stdout), for a command
// that must undo something when its output is lost (pg-queue claim gives
// its claim back). The run then fails with exit 1 like any lost output.
func (r *Runtime) CatchBrokenPipe() {
	if r.pipe == nil {
		r.pipe = make(chan os.Signal, 1)
		signal.Notify(r.pipe, syscall.SIGPIPE)
	}
}

// Config resolves the configuration once: flags tagged `config:"key"` that
// were given on the command line, then the environment, the config file and
// the defaults.
func (r *Runtime) Config() (*config.Config, error) {
	if r.cfg != nil {
		return r.cfg, nil
	}
	flags, names := map[string]string{}, map[string]string{}
	if r.kctx != nil {
		for _, p := range r.kctx.Path {
			if p.Flag == nil {
				continue
			}
			if key := p.Flag.Tag.Get("config"); key != "" {
				flags[key] = flagString(r.kctx.FlagValue(p.Flag))
				names[key] = p.Flag.Name
			}
		}
	}
	cfg, err := config.Load(config.Options{LookupEnv: r.IO.LookupEnv, Flags: flags, FlagNames: names})
	if err != nil {
		return nil, err
	}
	// Keys from the config file (or a test's environment) are redacted
	// like those of the process's environment.
	secrets.Register(append(secrets.FromEnv(r.IO.Env), cfg.Secrets()...)...)
	r.cfg = cfg
	return cfg, nil
}

// Home is the resolved data root, $POWERGLIDE_HOME.
func (r *Runtime) Home() (string, error) {
	cfg, err := r.Config()
	if err != nil {
		return "", err
	}
	return cfg.String("home"), nil
}

// flagString renders a flag's value in the form config parses: lists are
// comma-separated.
func flagString(v any) string {
	if ss, ok := v.([]string); ok {
		return strings.Join(ss, ",")
	}
	return fmt.Sprint(v)
}

type exitSignal struct{ code int }

// Main runs a binary against the process: it cancels the context on SIGINT
// or SIGTERM and returns the exit code. main() passes it to os.Exit.
func Main(spec *Spec, args []string, io *IO) int {
	defer waiting(spec, io.Getenv)()
	ctx, stop := SignalContext(context.Background())
	defer stop()
	return Run(ctx, spec, args, io)
}

// SignalError is the cause of a context cancelled by a signal.
type SignalError struct{ Signal syscall.Signal }

func (e *SignalError) Error() string { return "interrupted by " + e.Signal.String() }

// ExitCode is 128+n for signal n.
func (e *SignalError) ExitCode() int { return ExitSignalBase + int(e.Signal) }

// SignalContext returns a context cancelled, with a *SignalError cause, on
// SIGINT or SIGTERM. After the first signal the default handlers are back,
// so a second Ctrl-C ends a tool that is slow to stop.
func SignalContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			signal.Stop(ch)
			cancel(&SignalError{Signal: s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// Run parses args and runs the selected command. It never exits the
// process; it returns the exit code. The command's stdout is checked: a
// run whose output could not be written exits 1, never 0.
func Run(ctx context.Context, spec *Spec, args []string, io *IO) (code int) {
	out := &output{w: io.Out}
	checked := *io
	checked.Out = out
	io = &checked
	rt := &Runtime{Ctx: ctx, IO: io, Spec: spec}
	defer func() {
		if rt.pipe != nil {
			signal.Stop(rt.pipe)
		}
		for i := len(rt.done) - 1; i >= 0; i-- {
			rt.done[i]()
		}
		code = outputCode(rt, code, out.failed())
	}()
	summary, detail, _ := strings.Cut(spec.Description, "\n")
	opts := []kong.Option{
		kong.Name(spec.Name),
		kong.Description(strings.TrimSpace(summary + "\n\n" + strings.TrimSpace(detail))),
		kong.Writers(io.Out, io.Err),
		kong.Exit(func(c int) { panic(exitSignal{c}) }),
		kong.Vars{"version": spec.Name + " " + version()},
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, NoExpandSubcommands: false}),
		kong.Help(helpPrinter),
		kong.PostBuild(dropShadowedFlags),
		kong.Bind(rt, io),
		kong.BindTo(ctx, (*context.Context)(nil)),
	}
	opts = append(opts, numberMappers()...)
	opts = append(opts, spec.Options...)
	// The grammar for the run at hand: without the help texts unless it
	// may describe the tool, and of the command it names alone.
	grammar := spec.CLI
	if !describes(args) {
		opts = append(opts, kong.PostBuild(dropHelp))
		if spec.Default != nil && defaultSuffices(spec, args) {
			grammar = spec.Default()
		} else if ignore := otherCommands(grammar, args); ignore != "" {
			opts = append(opts, kong.IgnoreFields(ignore))
		}
	}
	// Building and parsing the grammar leaves a few hundred KB of garbage
	// and nothing else: a collection then (a waiting tool's first comes at
	// 2 MB) costs a start more than the memory it would free.
	collect := collectorOff()
	defer collect() // on every early return
	parser, err := kong.New(grammar, opts...)
	if err != nil {
		// The grammar is wrong: a programming error, not a usage error.
		fmt.Fprintf(io.Err, "%s: error: %v\n", spec.Name, err)
		return ExitFailure
	}
	rt.kong = parser
	ignoreEmptyEnv(parser.Model.Node, io.LookupEnv)
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(exitSignal); ok {
				code = e.code
				return
			}
			// A bug, not bad input: Go would exit 2, which the table
			// keeps for bad input alone.
			fmt.Fprintf(io.Err, "%s: error: internal error: %s\n%s", spec.Name, errorLine(fmt.Sprint(r)), debug.Stack())
			code = ExitFailure
		}
	}()
	kctx, err := parser.Parse(args)
	var werr *WriteError
	if errors.As(err, &werr) { // --help could not be written
		fmt.Fprintf(io.Err, "%s: error: %v\n", spec.Name, werr)
		return ExitFailure
	}
	if err != nil {
		// One line, as every error (DESIGN.md §2), naming where help is.
		msg := lowerFirst(err.Error())
		var pe *kong.ParseError
		if errors.As(err, &pe) && pe.Context != nil {
			msg += fmt.Sprintf(" (see '%s --help')", commandLine(spec.Name, pe.Context))
		}
		fmt.Fprintf(io.Err, "%s: error: %s\n", spec.Name, errorLine(msg))
		return ExitUsage
	}
	collect()
	rt.kctx = kctx
	for _, p := range kctx.Path {
		if p.Flag != nil && p.Flag.Name == "json" {
			if b, ok := kctx.FlagValue(p.Flag).(bool); ok && b {
				rt.JSON = true
			}
		}
	}
	err = kctx.Run()
	if err == nil {
		return ExitOK
	}
	return Report(rt, err)
}

// ignoreEmptyEnv drops, for this run, the environment variables of flags
// that are set but empty, so `POWERGLIDE_LEASE= pg-queue claim` means the
// default, as it does in the config layer, instead of kong parsing "" as a
// duration and failing. The model is built afresh by every Run.
func ignoreEmptyEnv(n *kong.Node, lookup func(string) (string, bool)) {
	for _, f := range n.Flags {
		kept := f.Tag.Envs[:0:0]
		for _, e := range f.Tag.Envs {
			if v, ok := lookup(e); ok && v == "" {
				continue
			}
			kept = append(kept, e)
		}
		if len(kept) != len(f.Tag.Envs) {
			f.Tag.Envs, f.Envs = kept, kept
		}
	}
	for _, c := range n.Children {
		ignoreEmptyEnv(c, lookup)
	}
}

func commandLine(name string, kctx *kong.Context) string {
	if kctx.Selected() == nil {
		return name
	}
	return name + " " + kctx.Selected().Path()
}

// Report prints err in the one error format and returns its exit code. A
// context cancelled by a signal yields 128+n.
func Report(rt *Runtime, err error) int {
	code := ExitCode(err)
	var sig *SignalError
	if cause := context.Cause(rt.Ctx); errors.As(cause, &sig) && (errors.Is(err, context.Canceled) || errors.As(err, &sig)) {
		code = sig.ExitCode()
		err = sig
	}
	var e *Error
	if errors.As(err, &e) && e.Err == nil {
		return code // silent exit: the command already spoke
	}
	msg := lowerFirst(err.Error())
	// stderr is most often a terminal, and a message may quote a task's
	// title or a command's output: escapes are shown, not obeyed.
	fmt.Fprintf(rt.IO.Err, "%s: error: %s\n", rt.Spec.Name, termtext.Visible(errorLine(msg)))
	if rt.JSON {
		rec := protocol.ErrorEvent{Type: protocol.EventError, Tool: rt.Spec.Name, Kind: Kind(err), Message: msg, ExitCode: code}
		if le := lineOf(err); le > 0 {
			rec.Line = le
		}
		_ = jsonl.NewEncoder(rt.IO.Out).Encode(rec)
	}
	return code
}

func lineOf(err error) int {
	var le *jsonl.LineError
	if errors.As(err, &le) {
		return le.Line
	}
	return 0
}

// maxErrLine caps the error line on stderr; the JSON error record keeps the
// whole message.
const maxErrLine = 2000

// errorLine folds an error message onto one line, as DESIGN.md §2 wants.
// It is not termtext.OneLine, on purpose: a message that carries a
// command's output (a verifier's, an external tool's stderr) keeps its
// lines apart as " | " and each line's text exactly, and a very long one
// keeps its head and says how much it lost.
func errorLine(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		var parts []string
		for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
			if l = strings.TrimSpace(l); l != "" {
				parts = append(parts, l)
			}
		}
		s = strings.Join(parts, " | ")
	}
	if len(s) > maxErrLine {
		head := termtext.Cut(s, maxErrLine)
		s = fmt.Sprintf("%s… (%d more bytes)", head, len(s)-len(head))
	}
	return s
}

// lowerFirst lowers the first letter and drops a final period, so every
// message reads "pg-x: error: something went wrong".
func lowerFirst(s string) string {
	s = strings.TrimSuffix(strings.TrimSpace(s), ".")
	if len(s) > 1 && s[0] >= 'A' && s[0] <= 'Z' && !(s[1] >= 'A' && s[1] <= 'Z') {
		s = strings.ToLower(s[:1]) + s[1:]
	}
	return s
}

// parsing counts the runs that parse now, with the GC percent to restore
// when the last one is done: runs that overlap (the tools' tests run Run
// in parallel) must not leave the collector off.
var parsing struct {
	sync.Mutex
	n  int
	gc int
}

// collectorOff turns the collector off until the returned function (safe
// to call more than once) is called.
func collectorOff() (collect func()) {
	parsing.Lock()
	if parsing.n == 0 {
		parsing.gc = debug.SetGCPercent(-1)
	}
	parsing.n++
	parsing.Unlock()
	return sync.OnceFunc(func() {
		parsing.Lock()
		if parsing.n--; parsing.n == 0 {
			debug.SetGCPercent(parsing.gc)
		}
		parsing.Unlock()
	})
}
