package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/powerglide/powerglide/pkg/internal/testenv"
	"github.com/powerglide/powerglide/pkg/jsonl"
)

type toyCLI struct {
	Common `embed:""`
	Greet  toyGreet `cmd:"" help:"Say hello."`
	Fail   toyFail  `cmd:"" help:"Fail with a chosen code."`
}

type toyGreet struct {
	Name  string        `arg:"" optional:"" help:"Who to greet."`
	Model string        `config:"model" help:"Model to use." env:"POWERGLIDE_MODEL"`
	Shout bool          `help:"Shout." short:"s"`
	Mode  string        `enum:"a,b" default:"a" help:"Mode."`
	Wait  time.Duration `default:"3s" env:"PG_TOY_WAIT" help:"Wait."`
}

func (c *toyGreet) Help() string {
	return "Greets by name.\n\nExamples:\n  $ pg-toy greet ann\n  $ pg-toy greet -s bob"
}

func (c *toyGreet) Run(rt *Runtime) error {
	cfg, err := rt.Config()
	if err != nil {
		return err
	}
	msg := "hello " + c.Name + " via " + cfg.String("model")
	if c.Wait != 3*time.Second {
		msg += " after " + c.Wait.String()
	}
	if c.Shout {
		msg = strings.ToUpper(msg)
	}
	_, err = rt.IO.Out.Write([]byte(msg + "\n"))
	return err
}

type toyFail struct {
	Code int  `arg:"" help:"Exit code."`
	JSON bool `help:"JSON errors."`
}

func (c *toyFail) Run(rt *Runtime) error {
	switch c.Code {
	case 1:
		return errors.New("Something broke.")
	case 5:
		return errors.New("verify failed:\n./main.go:3:1: syntax error\n\n  exit status 1\n")
	case 2:
		return &jsonl.LineError{Name: "stdin", Line: 7, Err: errors.New("invalid JSON")}
	case 3:
		return Nothingf("no claimable task")
	case 4:
		return Limitf("step limit 200 reached")
	case 124:
		return context.DeadlineExceeded
	}
	return Silent(c.Code)
}

func toySpec() *Spec {
	return &Spec{Name: "pg-toy", Description: "A toy.\nIt exists for tests.", CLI: &toyCLI{}, Schemas: []string{"task"}}
}

func runToy(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), toySpec(), args, Test(nil, &out, &errb, env...))
	return code, out.String(), errb.String()
}

func TestRunExitCodes(t *testing.T) {
	home := t.TempDir()
	env := []string{"HOME=" + home}
	cases := []struct {
		args    []string
		code    int
		stderr  string
		jsonErr bool
	}{
		{[]string{"fail", "1"}, 1, "pg-toy: error: something broke\n", false},
		{[]string{"fail", "2", "--json"}, 2, "pg-toy: error: stdin:7: invalid JSON\n", true},
		{[]string{"fail", "5", "--json"}, 1, "pg-toy: error: verify failed: | ./main.go:3:1: syntax error | exit status 1\n", true},
		{[]string{"fail", "3"}, 3, "pg-toy: error: no claimable task\n", false},
		{[]string{"fail", "4"}, 4, "pg-toy: error: step limit 200 reached\n", false},
		{[]string{"fail", "124"}, 124, "pg-toy: error: context deadline exceeded\n", false},
		{[]string{"fail", "42"}, 42, "", false},
		{[]string{"nope"}, 2, "pg-toy: error: unexpected argument nope (see 'pg-toy --help')\n", false},
		{[]string{"greet", "--mode", "c"}, 2, "pg-toy: error: --mode must be one of \"a\",\"b\" but got \"c\" (see 'pg-toy greet --help')\n", false},
	}
	for _, c := range cases {
		code, out, errs := runToy(t, env, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", c.args, code, c.code, errs)
		}
		if errs != c.stderr {
			t.Errorf("%v: stderr %q, want %q", c.args, errs, c.stderr)
		}
		if c.jsonErr != strings.Contains(out, `"type":"error"`) {
			t.Errorf("%v: stdout %q, JSON error record expected: %v", c.args, out, c.jsonErr)
		}
		if c.jsonErr && c.code == 2 && !strings.Contains(out, `"line":7`) {
			t.Errorf("%v: error record lacks the line: %s", c.args, out)
		}
	}
}

func TestRunHelpAndVersion(t *testing.T) {
	code, out, _ := runToy(t, nil, "--help")
	if code != 0 || !strings.Contains(out, "A toy.") || !strings.Contains(out, "greet") {
		t.Fatalf("--help: %d %q", code, out)
	}
	code, out, _ = runToy(t, nil, "--version")
	if code != 0 || !strings.HasPrefix(out, "pg-toy ") {
		t.Fatalf("--version: %d %q", code, out)
	}
}

func TestRunConfigLayers(t *testing.T) {
	home := t.TempDir()
	cfgDir := filepath.Join(home, ".config", "powerglide")
	os.MkdirAll(cfgDir, 0o755)
	os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(`{"model": "file/m"}`), 0o644)
	env := []string{"HOME=" + home}
	if _, out, _ := runToy(t, env, "greet", "x"); out != "hello x via file/m\n" {
		t.Errorf("file layer: %q", out)
	}
	env = append(env, "POWERGLIDE_MODEL=env/m")
	if _, out, _ := runToy(t, env, "greet", "x"); out != "hello x via env/m\n" {
		t.Errorf("env layer: %q", out)
	}
	if _, out, _ := runToy(t, env, "greet", "x", "--model", "flag/m"); out != "hello x via flag/m\n" {
		t.Errorf("flag layer: %q", out)
	}
	code, out, _ := runToy(t, env, "config", "--json")
	if code != 0 || !strings.Contains(out, `{"type":"config","key":"model","value":"env/m","source":"env","origin":"POWERGLIDE_MODEL"}`) {
		t.Errorf("config --json: %d %s", code, out)
	}
}

func TestBrokenConfigIsUsageError(t *testing.T) {
	home := t.TempDir()
	cfg := filepath.Join(home, "c.json")
	os.WriteFile(cfg, []byte("{\n  \"model\": \"x\",\n  \"retries\": \"three\"\n}\n"), 0o644)
	code, _, errs := runToy(t, []string{"HOME=" + home, "POWERGLIDE_CONFIG=" + cfg}, "greet")
	want := "pg-toy: error: config " + cfg + ":3: key \"retries\": expected an integer, got a string\n"
	if code != 2 || errs != want {
		t.Fatalf("exit %d, stderr %q, want 2 and %q", code, errs, want)
	}
}

func TestGeneratedDocs(t *testing.T) {
	code, out, _ := runToy(t, nil, "man")
	if code != 0 || !strings.HasPrefix(out, ".TH PG-TOY 1 \"\" \"powerglide\" \"powerglide manual\"\n.SH NAME\n") || !strings.Contains(out, "EXIT STATUS") || !strings.Contains(out, "POWERGLIDE_MODEL") {
		t.Fatalf("man: %d %q", code, out)
	}
	// Each command is a subsection: its line, its summary, then the detail
	// with the examples kept as lines, then its flags.
	greet := ".SS \"pg\\-toy greet [<name>] [flags]\"\nSay hello.\n.PP\nGreets by name.\n.PP\nExamples:\n.RS 4\n.nf\n$ pg\\-toy greet ann\n$ pg\\-toy greet \\-s bob\n.fi\n.RE\n"
	if !strings.Contains(out, greet) || !strings.Contains(out, ".TP\n\\fB\\-s, \\-\\-shout\\fR\nShout.\n") {
		t.Fatalf("man: the greet command is not rendered as a subsection:\n%s", out)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, _ := runToy(t, nil, "completion", sh)
		if code != 0 || !strings.Contains(out, "greet") || !strings.Contains(out, "shout") {
			t.Fatalf("completion %s: %d %q", sh, code, out)
		}
	}
	code, out, _ = runToy(t, nil, "schema")
	if code != 0 || out != "task\n" {
		t.Fatalf("schema: %d %q", code, out)
	}
	if code, _, _ = runToy(t, nil, "schema", "nope"); code != 2 {
		t.Fatalf("schema nope: exit %d", code)
	}
}

func TestSignalExitCode(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(&SignalError{Signal: 15})
	var out, errb bytes.Buffer
	rt := &Runtime{Ctx: ctx, IO: Test(nil, &out, &errb), Spec: toySpec()}
	if code := Report(rt, context.Canceled); code != 143 {
		t.Fatalf("exit %d, want 143", code)
	}
}

// A typed flag's variable that is set but empty means the default, as in the
// config layer; a set one is parsed, and a bad one is a usage error.
func TestEmptyEnvMeansDefault(t *testing.T) {
	t.Setenv("PG_TOY_WAIT", "")
	if code, out, errs := runToy(t, []string{"PG_TOY_WAIT="}, "greet", "x"); code != 0 || out != "hello x via anthropic/claude-sonnet-4-5\n" {
		t.Fatalf("empty: %d %q %q", code, out, errs)
	}
	t.Setenv("PG_TOY_WAIT", "5s")
	if code, out, _ := runToy(t, []string{"PG_TOY_WAIT=5s"}, "greet", "x"); code != 0 || out != "hello x via anthropic/claude-sonnet-4-5 after 5s\n" {
		t.Fatalf("set: %d %q", code, out)
	}
	t.Setenv("PG_TOY_WAIT", "soon")
	if code, _, errs := runToy(t, []string{"PG_TOY_WAIT=soon"}, "greet", "x"); code != 2 || !strings.Contains(errs, "PG_TOY_WAIT") {
		t.Fatalf("bad: %d %q", code, errs)
	}
}

// TestBashCompletionRuns sources the generated script in a real bash and
// asks it for candidates, as bash does on Tab.
func TestBashCompletionRuns(t *testing.T) {
	_, script, _ := runToy(t, nil, "completion", "bash")
	for _, tc := range []struct{ words, want string }{
		{"pg-toy gr", "greet"},
		{"pg-toy greet --sh", "--shout"},
		{"pg-toy greet --mode ", "a b"},
		{"pg-toy fail --j", "--json"},
	} {
		if got, path := BashComplete(t, script, "_pg_toy", tc.words); got != tc.want || path != os.Getenv("PATH") {
			t.Errorf("%q: got %q, want %q; PATH %q", tc.words, got, tc.want, path)
		}
	}
}

// TestZshCompletesOnFirstTab: compinit autoloads the zsh script as the
// function _pg-toy on the first Tab of a shell, which must complete then,
// not only on the second. A real interactive zsh on a pty (zsh/zpty) gets
// "pg-toy gr<Tab><Enter>", and pg-toy, a shell function there, prints
// what it was given.
func TestZshCompletesOnFirstTab(t *testing.T) {
	testenv.Need(t, "the zsh completion script is run in zsh", "zsh")
	dir := t.TempDir()
	_, script, _ := runToy(t, nil, "completion", "zsh")
	if err := os.WriteFile(filepath.Join(dir, "_pg-toy"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("zsh", "-n", filepath.Join(dir, "_pg-toy")).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v: %s", err, out)
	}
	// The markers are split in what the shell echoes ("RE""ADY") so that
	// only their output matches.
	drive := `zmodload zsh/zpty
zpty -b z 'env -i HOME=$DIR TERM=dumb PATH=/usr/bin:/bin zsh -f -i'
zpty -w z "fpath=($DIR \$fpath); autoload -U compinit; compinit -u -D; PS1='> '; pg-toy() { print -r -- \"AR\"\"GS<\$*>\"; }; print RE\"\"ADY"
zpty -r -m z out '*READY*'
zpty -w -n z $'pg-toy gr\t'
zpty -w -n z $'\r'
zpty -r -m z out '*ARGS<*>*'
print -r -- "${${out##*ARGS<}%%>*}"
zpty -d z
`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "zsh", "-f", "-c", drive)
	cmd.Env = append(os.Environ(), "DIR="+dir)
	out, err := cmd.CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "greet" {
		t.Fatalf("pg-toy gr<Tab>: got %q (%v), want greet", got, err)
	}
}

type toyNumCLI struct {
	Common `embed:""`
	Num    toyNum `cmd:"" help:"Print numbers."`
}

type toyNum struct {
	Count int            `help:"A count."`
	Token int64          `help:"A token."`
	Ratio float64        `help:"A ratio."`
	Cost  *float64       `help:"A cost."`
	Wait  time.Duration  `help:"A wait." env:"PG_TOY_WAIT"`
	Lease *time.Duration `help:"A lease."`
	Name  string         `help:"A name."`
}

func (c *toyNum) Run(rt *Runtime) error {
	_, err := fmt.Fprintf(rt.IO.Out, "%d %d %g %v %s %q\n", c.Count, c.Token, c.Ratio, c.Cost != nil, c.Wait, c.Name)
	return err
}

// Numbers read one way in every tool: a negative number is a value, not a
// short flag; NaN and infinities are refused; durations lie in 0..100 years.
func TestRunNumbers(t *testing.T) {
	env := []string{"HOME=" + t.TempDir()}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		spec := &Spec{Name: "pg-toy", Description: "A toy.", CLI: &toyNumCLI{}}
		code := Run(context.Background(), spec, args, Test(nil, &out, &errb, env...))
		return code, out.String(), errb.String()
	}
	ok := []struct {
		args []string
		out  string
	}{
		{[]string{"num", "--count", "-1"}, "-1 0 0 false 0s \"\"\n"},
		{[]string{"num", "--count=-1", "--token", "-7"}, "-1 -7 0 false 0s \"\"\n"},
		{[]string{"num", "--ratio", "-0.5", "--cost", "1.5"}, "0 0 -0.5 true 0s \"\"\n"},
		{[]string{"num", "--wait", "876000h"}, "0 0 0 false 876000h0m0s \"\"\n"},
		{[]string{"num", "--wait", "1m", "--count", "3"}, "3 0 0 false 1m0s \"\"\n"},
	}
	for _, c := range ok {
		code, out, errs := run(c.args...)
		if code != 0 || out != c.out {
			t.Errorf("%v: exit %d, %q %q; want %q", c.args, code, out, errs, c.out)
		}
	}
	bad := []struct {
		args []string
		msg  string
	}{
		{[]string{"num", "--wait", "2562047h"}, `--wait: duration "2562047h" is out of range: at most 876000h (100 years)`},
		{[]string{"num", "--wait", "3000000h"}, "--wait: expected a duration such as 30s or 10m, at most 876000h"},
		{[]string{"num", "--wait", "876001h"}, `--wait: duration "876001h" is out of range: at most 876000h (100 years)`},
		{[]string{"num", "--lease", "-5m"}, `--lease: expected a duration that is not negative, got "-5m"`},
		{[]string{"num", "--wait=-1s"}, `--wait: expected a duration that is not negative, got "-1s"`},
		{[]string{"num", "--ratio", "NaN"}, `--ratio: expected a finite number but got "NaN"`},
		{[]string{"num", "--cost=+Inf"}, `--cost: expected a finite number but got "+Inf"`},
		{[]string{"num", "--count", "1.5"}, `--count: expected an integer but got "1.5"`},
		{[]string{"num", "--count", "-x"}, "--count"},
		{[]string{"num", "--name", "-1"}, "--name"}, // only numbers take a leading '-'
	}
	for _, c := range bad {
		code, out, errs := run(c.args...)
		if code != ExitUsage || out != "" || !strings.Contains(errs, c.msg) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.args, code, out, errs, c.msg)
		}
	}
	// The environment goes through the same check.
	t.Setenv("PG_TOY_WAIT", "-3s") // kong reads the process environment
	env = append(env, "PG_TOY_WAIT=-3s")
	if code, _, errs := run("num"); code != ExitUsage || !strings.Contains(errs, "not negative") {
		t.Errorf("PG_TOY_WAIT=-3s: exit %d, %q", code, errs)
	}
}

// TestWaits: a tool that mostly waits runs its goroutines on one
// processor and collects garbage at half the heap's growth, each unless
// the environment says otherwise; other tools keep the runtime's choices.
func TestWaits(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, c := range []struct {
		waits          bool
		env            map[string]string
		procs, percent int
	}{
		{false, nil, 4, 100},
		{true, map[string]string{"GOMAXPROCS": "3"}, 4, 50},
		{true, map[string]string{"GOGC": "200"}, 1, 100},
		{true, nil, 1, 50},
	} {
		runtime.GOMAXPROCS(4)
		debug.SetGCPercent(100)
		stop := waiting(&Spec{Waits: c.waits}, func(k string) string { return c.env[k] })
		stop()
		if got := runtime.GOMAXPROCS(0); got != c.procs {
			t.Errorf("waits %v, env %v: %d processors, want %d", c.waits, c.env, got, c.procs)
		}
		if got := debug.SetGCPercent(100); got != c.percent {
			t.Errorf("waits %v, env %v: GOGC %d, want %d", c.waits, c.env, got, c.percent)
		}
	}
}

// TestTuneGC: the GC percent of a waiting tool is 50 while its live heap
// is small, and 100 once the heap holds more live data.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(smallHeapGC))
	done := make(chan struct{})
	defer close(done)
	go tuneGC(done)
	percent := func(want int) {
		t.Helper()
		for i := 0; i < 200; i++ {
			runtime.GC()
			time.Sleep(5 * time.Millisecond)
			gogc := []metrics.Sample{{Name: "/gc/gogc:percent"}}
			metrics.Read(gogc)
			if int(gogc[0].Value.Uint64()) == want {
				return
			}
		}
		t.Fatalf("GC percent never became %d", want)
	}
	percent(smallHeapGC)
	big := make([][]byte, 64)
	for i := range big {
		big[i] = make([]byte, 2*smallHeap/len(big))
	}
	percent(100)
	runtime.KeepAlive(big)
	big = nil
	percent(smallHeapGC)
}

// probeCLI records, while kong parses (AfterApply) and when the command
// runs, what Run set up around the parse.
type probeCLI struct {
	Common `embed:""`
	Probe  probeCmd `cmd:"" help:"Probe the parse." default:"withargs"`
	Other  otherCmd `cmd:"" help:"Another command." aliases:"else"`
}

type otherCmd struct {
	Level int `help:"A level."`
}

func (otherCmd) Run() error { return nil }

type probeCmd struct {
	Flag     string `help:"A flag's help text." default:"${version}"`
	Loud     bool   `help:"Be loud." short:"l"`
	parsing  int    // GC percent while kong applied the arguments
	running  int    // GC percent when the command ran
	helps    []string
	defaults []string
	commands []string // of the grammar kong built
}

func gcPercent() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }

func (c *probeCmd) AfterApply() error { c.parsing = gcPercent(); return nil }

func (c *probeCmd) Run(rt *Runtime) error {
	c.running = gcPercent()
	for _, n := range rt.kong.Model.Children {
		c.commands = append(c.commands, n.Name)
	}
	_ = kong.Visit(rt.kong.Model.Node, func(v kong.Visitable, next kong.Next) error {
		switch v := v.(type) {
		case *kong.Node:
			c.helps = append(c.helps, v.Help)
		case *kong.Value:
			c.helps = append(c.helps, v.Help)
			c.defaults = append(c.defaults, v.Default)
		}
		return next(nil)
	})
	return nil
}

// TestParseNeitherCollectsNorInterpolatesHelp: a run that describes
// nothing parses with the collector off and without the help texts,
// which only help, the man page and completions read (issue 21: a third
// of pg-loop's start); the command runs with the GC percent it had, and
// defaults still take their ${vars}.
func TestParseNeitherCollectsNorInterpolatesHelp(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(70))
	grammar := &probeCLI{}
	spec := &Spec{Name: "pg-toy", Description: "A toy.", CLI: grammar}
	var out, errb bytes.Buffer
	if code := Run(context.Background(), spec, []string{"--flag", "x"}, Test(nil, &out, &errb)); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	c := grammar.Probe
	if c.parsing != -1 || c.running != 70 {
		t.Errorf("GC percent %d while parsing, %d when running; want -1 and 70", c.parsing, c.running)
	}
	for _, h := range c.helps {
		if h != "" {
			t.Errorf("help text %q kept in a run that shows no help", h)
		}
	}
	if len(c.defaults) == 0 || !slices.Contains(c.defaults, "pg-toy dev") && !slices.Contains(c.defaults, "pg-toy "+version()) {
		t.Errorf("defaults %q: ${version} not interpolated", c.defaults)
	}
	for _, args := range [][]string{{"--help"}, {"probe", "-h"}, {"man"}, {"probe", "-lh"}, {"-hl"}} {
		out.Reset()
		if code := Run(context.Background(), &Spec{Name: "pg-toy", Description: "A toy.", CLI: &probeCLI{}}, args, Test(nil, &out, &errb)); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errb.String())
		}
		if !strings.Contains(out.String(), "help text") {
			t.Errorf("%q lacks the flag's help text:\n%s", args, out.String())
		}
	}
}

// TestParseBuildsTheNamedCommandAlone: arguments that start with a
// command's name are parsed with that command's grammar alone; any other
// start, and every run that may describe the tool, with the whole; both
// answer alike.
func TestParseBuildsTheNamedCommandAlone(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"probe", "--flag", "x"}, "probe"},
		{[]string{"--flag", "x"}, "schema,config,man,completion,probe,other"},
		{[]string{"--flag", "probe"}, "schema,config,man,completion,probe,other"},
	} {
		grammar := &probeCLI{}
		var out, errb bytes.Buffer
		if code := Run(context.Background(), &Spec{Name: "pg-toy", Description: "A toy.", CLI: grammar}, c.args, Test(nil, &out, &errb)); code != 0 {
			t.Fatalf("%q: exit %d: %s", c.args, code, errb.String())
		}
		if got := strings.Join(grammar.Probe.commands, ","); got != c.want {
			t.Errorf("%q: kong built the commands %q, want %q", c.args, got, c.want)
		}
	}
	defer func() { pruneCommands = true }()
	for _, args := range [][]string{
		{"other", "--level", "x"},
		{"else", "--bogus"},
		{"other", "extra"},
		{"probe", "--level", "1"},
		{"other", "--help"},
		{"other", "man"},
		{"probe", "--flag"},
	} {
		var got, want [2]bytes.Buffer
		pruneCommands = true
		gotCode := Run(context.Background(), &Spec{Name: "pg-toy", Description: "A toy.", CLI: &probeCLI{}}, args, Test(nil, &got[0], &got[1]))
		pruneCommands = false
		wantCode := Run(context.Background(), &Spec{Name: "pg-toy", Description: "A toy.", CLI: &probeCLI{}}, args, Test(nil, &want[0], &want[1]))
		if gotCode != wantCode || got[0].String() != want[0].String() || got[1].String() != want[1].String() {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; the whole grammar: exit %d, stdout %q, stderr %q",
				args, gotCode, got[0].String(), got[1].String(), wantCode, want[0].String(), want[1].String())
		}
	}
}

// TestParseRestoresGCWhenRunsOverlap: runs that parse at the same time
// (the tests of the tools run Run in parallel) leave the collector as it
// was: a run that turned it off must not take "off" for the percent to
// restore from another run that turned it off before.
func TestParseRestoresGCWhenRunsOverlap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(70))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				var out, errb bytes.Buffer
				Run(context.Background(), toySpec(), []string{"fail", "0"}, Test(nil, &out, &errb))
			}
		}()
	}
	wg.Wait()
	if got := debug.SetGCPercent(70); got != 70 {
		t.Errorf("GC percent %d after overlapping runs, want 70", got)
	}
}

// A config file $POWERGLIDE_CONFIG names must exist: a typo is bad input
// (exit 2) naming the file, not a run on the defaults. The default path
// may be missing.
func TestNamedConfigMustExist(t *testing.T) {
	home := t.TempDir()
	missing := filepath.Join(home, "no-such.json")
	code, out, errs := runToy(t, []string{"HOME=" + home, "POWERGLIDE_CONFIG=" + missing}, "greet", "x")
	want := "pg-toy: error: config " + missing + ": no such file ($POWERGLIDE_CONFIG names it)\n"
	if code != 2 || out != "" || errs != want {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and %q", code, out, errs, want)
	}
	if code, _, errs := runToy(t, []string{"HOME=" + home, "POWERGLIDE_CONFIG=" + missing}, "config"); code != 2 || errs != want {
		t.Fatalf("config: exit %d, stderr %q", code, errs)
	}
	if code, out, errs := runToy(t, []string{"HOME=" + home, "POWERGLIDE_CONFIG="}, "greet", "x"); code != 0 || out != "hello x via anthropic/claude-sonnet-4-5\n" {
		t.Fatalf("empty POWERGLIDE_CONFIG (the default path, missing): exit %d, %q %q", code, out, errs)
	}
}

type toyJSONCLI struct {
	Common `embed:""`
	JSON   bool `help:"Print JSON Lines even on a terminal."`
}

// A tool with a --json of its own (pg-queue) lists it once in config
// --help, and it makes config print JSON on a terminal, given before the
// command or after it.
func TestConfigJSONOfTheTool(t *testing.T) {
	spec := func() *Spec { return &Spec{Name: "pg-toy", Description: "A toy.", CLI: &toyJSONCLI{}} }
	var out, errb bytes.Buffer
	if code := Run(context.Background(), spec(), []string{"config", "--help"}, Test(nil, &out, &errb)); code != 0 || strings.Count(out.String(), "--json") != 1 {
		t.Fatalf("config --help: exit %d, --json listed %d times:\n%s", code, strings.Count(out.String(), "--json"), out.String())
	}
	for _, args := range [][]string{{"config", "--json"}, {"--json", "config"}} {
		out.Reset()
		io := Test(nil, &out, &errb, "HOME="+t.TempDir())
		io.OutTTY = true
		if code := Run(context.Background(), spec(), args, io); code != 0 || !strings.HasPrefix(out.String(), `{"type":"config"`) {
			t.Fatalf("%q on a terminal: exit %d, %q %q", args, code, out.String(), errb.String())
		}
	}
}
