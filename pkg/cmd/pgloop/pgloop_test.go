package pgloop

import (
	"bytes"
	"context"
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
		{[]string{"--task", "a", "--max-steps=-1"}, "--max-steps must not be negative"},
		{[]string{"--task", "a", "--budget-usd=-1"}, "--budget-usd must not be negative"},
		{[]string{"--task", "a", "--velocity", "fast"}, "--velocity: expected a number"},
		{[]string{"--task", " "}, "the prompt is empty"},
		{[]string{"--resume", "x", "--continue"}, "not both"},
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

// A resume takes the saved options for the flags left at their defaults;
// flags given again win, components as a pair.
func TestRestoreOptions(t *testing.T) {
	saved := savedOptions{LLMServe: "m serve", Tools: "t", Verify: "make test", MaxVerify: 7, Commit: true, BreakerRepeat: 0, BreakerFailures: 5, Reserve: 100, Promise: "OK"}
	c := &RunCmd{LLM: "mine", Verify: "go test", MaxVerify: 3, BreakerRepeat: 3, BreakerFailures: 5, Reserve: 2048, VerifyTimeout: 10 * time.Minute}
	c.restore(saved)
	if c.LLM != "mine" || c.LLMServe != "" {
		t.Errorf("model component: %q %q", c.LLM, c.LLMServe)
	}
	if c.Tools != "t" || c.Verify != "go test" || c.MaxVerify != 7 || !c.Commit || c.BreakerRepeat != 0 || c.Reserve != 100 || c.Promise != "OK" {
		t.Errorf("restored %+v", c)
	}
}
