package pgloop

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
)

// Flag checks happen before anything runs: usage errors exit 2.
func TestUsageErrors(t *testing.T) {
	home := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{nil, "no tasks"},
		{[]string{"--task", "a", "--team", "t", "--worker", "1"}, "give one task source"},
		{[]string{"--task", "a", "--llm", "x", "--llm-serve", "y"}, "give --llm or --llm-serve"},
		{[]string{"--task", "a", "--tools", "x", "--tools-serve", "y"}, "give --tools or --tools-serve"},
		{[]string{"--team", "t"}, "team mode needs --worker"},
		{[]string{"--team", "../t", "--worker", "1"}, "invalid team name"},
		{[]string{"--task", "a", "--max-steps=-1"}, `--max-steps: key "loop_max_steps": expected a number that is not negative`},
		{[]string{"--task", "a", "--budget-usd=-1"}, `--budget-usd: key "loop_budget_usd": expected a number that is not negative`},
		{[]string{"--task", "a", "--budget-usd", "NaN"}, `--budget-usd: expected a finite number but got "NaN"`},
		{[]string{"--task", "a", "--budget-usd=+Inf"}, `--budget-usd: expected a finite number`},
		{[]string{"--task", "a", "--idle-wait", "2562047h"}, `--idle-wait: duration "2562047h" is out of range`},
		{[]string{"--task", "a", "--velocity", "fast"}, "--velocity: expected a number"},
		{[]string{"--task", "a", "--velocity=NaN"}, `--velocity: expected a number ≥ 0, got "NaN"`},
		{[]string{"--task", "a", "--velocity=+Inf"}, `--velocity: expected a number ≥ 0, got "+Inf"`},
		{[]string{"--task", "a", "--velocity=-1"}, `--velocity: expected a number ≥ 0, got "-1"`},
		{[]string{"--task", "a", "--max-tokens", "0"}, "--max-tokens must be at least 1: the budgets and the context window count it"},
		{[]string{"--task", " "}, "the prompt is empty"},
		{[]string{"--resume", "x", "--continue"}, "give one of --resume, --continue and --fork"},
		{[]string{"--fork", "x", "--resume", "y"}, "give one of --resume, --continue and --fork"},
		{[]string{"--task", "a", "--no-session", "--session-id", "s"}, "--no-session keeps no session"},
		{[]string{"--task", "a", "--session-id", "a/b"}, `--session-id: invalid session name "a/b"`},
		{[]string{"--session-id", "s", "--continue"}, "--session-id names a new session"},
		{[]string{"--fork", "nope"}, "--fork: session nope not found"},
		{[]string{"--team", "t", "--worker", "1", "--team-budget-usd", "NaN"}, `--team-budget-usd: expected a finite number but got "NaN"`},
		{[]string{"--team", "t", "--worker", "1", "--team-budget-usd=-1"}, "--team-budget-usd must be a finite number that is not negative"},
		{[]string{"--task", "a", "--team-budget-usd", "1"}, "--team-budget-usd needs team mode"},
		{[]string{"--task", "a", "--lease", "soon"}, "expected a duration"},
		{[]string{"--task", "a", "--bogus"}, "unknown flag --bogus"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		env := []string{"HOME=" + home, "POWERGLIDE_HOME=" + home, "XDG_CONFIG_HOME=" + home}
		code := cli.Run(context.Background(), Spec(), c.args, cli.Test(nil, &out, &errb, env...))
		if code != cli.ExitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
		if strings.Contains(out.String(), "POWERGLIDE_DONE") {
			t.Errorf("%v: a run started", c.args)
		}
	}
}

// Configuration reaches the loop: env POWERGLIDE_MAX_STEPS, and a flag wins.
func TestConfigKeys(t *testing.T) {
	home := t.TempDir()
	var out, errb bytes.Buffer
	env := []string{"HOME=" + home, "POWERGLIDE_HOME=" + home, "XDG_CONFIG_HOME=" + home, "POWERGLIDE_MAX_STEPS=7", "POWERGLIDE_BUDGET_USD=2.5"}
	code := cli.Run(context.Background(), Spec(), []string{"config", "--json"}, cli.Test(nil, &out, &errb, env...))
	if code != 0 || !strings.Contains(out.String(), `"key":"loop_max_steps","value":7,"source":"env"`) || !strings.Contains(out.String(), `"key":"loop_budget_usd","value":2.5`) {
		t.Fatalf("config: %d %s %s", code, out.String(), errb.String())
	}
}

func ptr[T any](v T) *T { return &v }

// A resume takes the saved options for every flag not given again; a flag
// given again wins whatever its value (an explicit --max-verify 3, the
// default, or --fresh=false), components as a pair. The safety limits come
// back too.
func TestRestoreOptions(t *testing.T) {
	saved := savedOptions{LLMServe: "m serve", Tools: "t", Verify: "make test", MaxVerify: ptr(7), MaxVerifySet: true, Commit: ptr(true), Fresh: ptr(true),
		BreakerRepeat: ptr(0), BreakerFailures: ptr(5), Reserve: ptr(100), Promise: "OK",
		MaxSteps: ptr(9), BudgetTokens: ptr(5000), BudgetUSD: ptr(0.5), MaxTokens: ptr(1000), ContextWindow: ptr(32000), Heartbeat: ptr(time.Second)}
	given := map[string]bool{"llm": true, "verify": true, "max-verify": true, "fresh": true}
	c := &RunCmd{LLM: "mine", Verify: "go test", MaxVerify: 3, BreakerRepeat: 3, BreakerFailures: 5, Reserve: 2048, VerifyTimeout: 10 * time.Minute,
		MaxSteps: 200, MaxTokens: 8192, Heartbeat: 5 * time.Second}
	c.maxVerifySet = true
	c.restore(saved, func(f string) bool { return given[f] })
	if c.LLM != "mine" || c.LLMServe != "" {
		t.Errorf("model component: %q %q", c.LLM, c.LLMServe)
	}
	if c.Tools != "t" || c.Verify != "go test" || c.MaxVerify != 3 || !c.maxVerifySet || !c.Commit || c.Fresh || c.BreakerRepeat != 0 || c.Reserve != 100 || c.Promise != "OK" {
		t.Errorf("restored %+v", c)
	}
	if c.MaxSteps != 9 || c.BudgetTokens != 5000 || c.BudgetUSD != 0.5 || c.MaxTokens != 1000 || c.ContextWindow != 32000 || !c.contextWindowSet || c.Heartbeat != time.Second {
		t.Errorf("limits not restored: %+v", c)
	}

	// Nothing given: everything saved comes back.
	c = &RunCmd{MaxVerify: 3}
	c.restore(saved, func(string) bool { return false })
	if c.MaxVerify != 7 || !c.maxVerifySet || !c.Fresh || c.LLMServe != "m serve" || c.Verify != "make test" {
		t.Errorf("restored %+v", c)
	}

	// What a run saves comes back the same.
	c.MaxSteps, c.BudgetUSD = 17, 1.25
	b, err := json.Marshal(c.saved())
	if err != nil {
		t.Fatal(err)
	}
	var back savedOptions
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	d := &RunCmd{}
	d.restore(back, func(string) bool { return false })
	if d.MaxSteps != 17 || d.BudgetUSD != 1.25 || d.MaxVerify != 7 || !d.maxVerifySet || !d.Fresh || d.ContextWindow != 32000 || !d.contextWindowSet {
		t.Errorf("round trip: %s -> %+v", b, d)
	}
	// A window left to the model is not saved: the resumed run asks again.
	if b, _ := json.Marshal((&RunCmd{ContextWindow: 200000}).saved()); strings.Contains(string(b), "context_window") {
		t.Errorf("saved a default window: %s", b)
	}
}

// A run's failure is reported like every other error: one line, lower
// case, no final period, on stderr only (the end marker stays the last
// stdout line), with its exit code.
func TestRunFailureFormat(t *testing.T) {
	home := t.TempDir()
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	os.WriteFile(model, []byte(`#!/bin/sh
cat > /dev/null
echo '{"type":"error","kind":"auth","message":"Invalid API key.\\nSet ANTHROPIC_API_KEY.","retryable":false}'
`), 0o755)
	tools := filepath.Join(dir, "tools")
	os.WriteFile(tools, []byte("#!/bin/sh\necho '[]'\n"), 0o755)
	var out, errb bytes.Buffer
	env := []string{"HOME=" + home, "POWERGLIDE_HOME=" + home, "XDG_CONFIG_HOME=" + home, "PATH=" + os.Getenv("PATH")}
	code := cli.Run(context.Background(), Spec(), []string{"--task", "x", "--llm", model, "--tools", tools, "--json"}, cli.Test(nil, &out, &errb, env...))
	if code != cli.ExitFailure {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		if strings.HasPrefix(l, "pg-loop: error:") {
			lines = append(lines, l)
		}
	}
	want := "pg-loop: error: unrecoverable: model auth error: Invalid API key. Set ANTHROPIC_API_KEY"
	if len(lines) != 1 || lines[0] != want {
		t.Errorf("stderr %q, want the one line %q", errb.String(), want)
	}
	if o := strings.TrimSpace(out.String()); !strings.HasSuffix(o, "\n<POWERGLIDE_ERROR>") {
		t.Errorf("stdout does not end with the marker:\n%s", o)
	}
}

// TestDefaultGrammarParsesAsTheWhole: a start that names no other command
// parses with run's grammar alone (cli.Spec.Default); it must answer every
// argument list as the whole grammar does, errors and help included.
func TestDefaultGrammarParsesAsTheWhole(t *testing.T) {
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home, "POWERGLIDE_HOME=" + home}
	whole := Spec()
	whole.Default = nil
	for _, args := range [][]string{
		{},
		{"--version"},
		{"--help"},
		{"run", "--help"},
		{"-h"},
		{"--bogus"},
		{"run", "--bogus"},
		{"--task"},
		{"--max-steps", "x", "--task", "t"},
		{"--task", "t", "--guard", "loud"},
		{"--task", "t", "-C", filepath.Join(home, "missing")},
		{"--tasks", filepath.Join(home, "missing.jsonl"), "--json"},
		{"--task", "serve", "--llm"},
		{"sessions", "--bogus"},
		{"schema", "nope"},
		{"--json", "serve", "--bogus"},
		{"--resume", "s-none", "--json"},
		{"extra", "words"},
		{"man"},
		{"completion", "bash"},
	} {
		var got, want [2]bytes.Buffer
		gotCode := cli.Run(context.Background(), Spec(), args, cli.Test(nil, &got[0], &got[1], env...))
		wantCode := cli.Run(context.Background(), whole, args, cli.Test(nil, &want[0], &want[1], env...))
		if gotCode != wantCode || got[0].String() != want[0].String() || got[1].String() != want[1].String() {
			t.Errorf("pg-loop %q: exit %d, stdout %q, stderr %q; the whole grammar: exit %d, stdout %q, stderr %q",
				args, gotCode, got[0].String(), got[1].String(), wantCode, want[0].String(), want[1].String())
		}
	}
}

// --resume and --fork work in the session's workdir wherever pg-loop is
// started, with the session's saved components (a relative --llm path
// saved absolute); -C given again wins and the session records it; a
// session whose workdir is gone needs -C.
func TestResumeWorksInSessionWorkdir(t *testing.T) {
	home, root := t.TempDir(), t.TempDir()
	for _, d := range []string{"start/bin", "elsewhere", "a", "c", "gone"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The model notes where it runs (--llm runs in the workdir), then answers.
	os.WriteFile(filepath.Join(root, "start/bin/model.sh"), []byte(`#!/bin/sh
cat > /dev/null
pwd >> ran-in
echo '{"type":"start","provider":"script","model":"sh"}'
echo '{"type":"end","stop_reason":"end_turn","message":{"role":"assistant","content":[{"type":"text","text":"done"}]},"usage":{"input_tokens":1,"output_tokens":1,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0}}'
`), 0o755)
	os.WriteFile(filepath.Join(root, "start/bin/tools.sh"), []byte("#!/bin/sh\n[ \"$1\" = list ] && echo '[]'\nexit 0\n"), 0o755)
	env := []string{"HOME=" + home, "POWERGLIDE_HOME=" + home, "XDG_CONFIG_HOME=" + home, "PATH=" + os.Getenv("PATH")}
	run := func(dir string, args ...string) (int, string) {
		t.Chdir(filepath.Join(root, dir))
		var out, errb bytes.Buffer
		code := cli.Run(context.Background(), Spec(), append(args, "--json"), cli.Test(nil, &out, &errb, env...))
		return code, errb.String()
	}
	ranIn := func(dir string) []string {
		b, _ := os.ReadFile(filepath.Join(root, dir, "ran-in"))
		return strings.Fields(string(b))
	}
	workdir := func(id string) string {
		b, err := os.ReadFile(filepath.Join(home, "sessions", id, "session.json"))
		if err != nil {
			t.Fatal(err)
		}
		var info struct{ Workdir string }
		json.Unmarshal(b, &info)
		return info.Workdir
	}
	a, c := filepath.Join(root, "a"), filepath.Join(root, "c")

	if code, errs := run("start", "--session-id", "p1", "-C", "../a", "--llm", "bin/model.sh", "--tools", "bin/tools.sh", "--task", "one"); code != 0 {
		t.Fatalf("start: exit %d: %s", code, errs)
	}
	// From another directory, with the saved components: the work goes on in a.
	if code, errs := run("elsewhere", "--resume", "p1", "--task", "two"); code != 0 {
		t.Fatalf("--resume: exit %d: %s", code, errs)
	}
	if code, errs := run("elsewhere", "--fork", "p1", "--session-id", "p1f", "--task", "three"); code != 0 {
		t.Fatalf("--fork: exit %d: %s", code, errs)
	}
	if got := ranIn("a"); len(got) != 3 || got[2] != a {
		t.Errorf("the model ran in %q, want a 3 times", got)
	}
	if got := ranIn("elsewhere"); len(got) != 0 {
		t.Errorf("a resumed or forked run worked in the current directory: %q", got)
	}
	if workdir("p1") != a || workdir("p1f") != a {
		t.Errorf("workdirs %q %q, want %q", workdir("p1"), workdir("p1f"), a)
	}

	// -C given again wins: the session moves there, and says so.
	code, errs := run("elsewhere", "--resume", "p1", "-C", "../c", "--task", "four")
	if code != 0 || !strings.Contains(errs, "pg-loop: session p1, now working in "+c+" (was "+a+")") {
		t.Fatalf("--resume -C: exit %d: %s", code, errs)
	}
	if got := ranIn("c"); len(got) != 1 || workdir("p1") != c {
		t.Errorf("-C: the model ran in %q, session workdir %q; want %q", got, workdir("p1"), c)
	}
	// --continue in c now finds it.
	if code, errs := run("c", "--continue", "--task", "five"); code != 0 || !strings.Contains(errs, "session p1") {
		t.Fatalf("--continue: exit %d: %s", code, errs)
	}

	// A workdir that is gone: exit 2, nothing run, unless -C.
	if code, errs := run("start", "--session-id", "g", "-C", "../gone", "--llm", "bin/model.sh", "--tools", "bin/tools.sh", "--task", "one"); code != 0 {
		t.Fatalf("start g: exit %d: %s", code, errs)
	}
	os.RemoveAll(filepath.Join(root, "gone"))
	for _, flag := range []string{"--resume", "--fork"} {
		code, errs = run("elsewhere", flag, "g", "--task", "two")
		if want := flag + " g: the session's workdir " + filepath.Join(root, "gone") + " is gone: give -C DIR to work elsewhere"; code != cli.ExitUsage || !strings.Contains(errs, want) {
			t.Errorf("%s of a gone workdir: exit %d, stderr %q; want 2 and %q", flag, code, errs, want)
		}
	}
	if code, errs := run("elsewhere", "--resume", "g", "-C", ".", "--task", "two"); code != 0 || len(ranIn("elsewhere")) != 1 {
		t.Errorf("--resume -C . of a gone workdir: exit %d: %s", code, errs)
	}
}
