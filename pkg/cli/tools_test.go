package cli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgdash"
	"github.com/powerglide/powerglide/pkg/cmd/pgllm"
	"github.com/powerglide/powerglide/pkg/cmd/pgloop"
	"github.com/powerglide/powerglide/pkg/cmd/pgmonitor"
	"github.com/powerglide/powerglide/pkg/cmd/pgpty"
	"github.com/powerglide/powerglide/pkg/cmd/pgqueue"
	"github.com/powerglide/powerglide/pkg/cmd/pgtool"
)

// TestToolsParseTheNamedCommandAsTheWhole: for every command of the seven
// tools, arguments that start with its name and cannot be run (a flag no
// command has, a stray argument, a flag without its value) get the same
// answer from the grammar of that command alone as from the whole.
func TestToolsParseTheNamedCommandAsTheWhole(t *testing.T) {
	defer cli.PruneCommands(true)
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home, "POWERGLIDE_HOME=" + home}
	for _, spec := range []func() *cli.Spec{pgdash.Spec, pgllm.Spec, pgloop.Spec, pgmonitor.Spec, pgpty.Spec, pgqueue.Spec, pgtool.Spec} {
		for _, name := range cli.CommandNames(spec().CLI) {
			for _, args := range [][]string{
				{name, "--no-such-flag"},
				{name, "--no-such-flag", "x", "y", "z"},
				{name, "--json", "--no-such-flag"},
				{name, "--team"},
			} {
				var got, want [2]bytes.Buffer
				cli.PruneCommands(true)
				gotCode := cli.Run(context.Background(), spec(), args, cli.Test(nil, &got[0], &got[1], env...))
				cli.PruneCommands(false)
				wantCode := cli.Run(context.Background(), spec(), args, cli.Test(nil, &want[0], &want[1], env...))
				if gotCode != wantCode || got[0].String() != want[0].String() || got[1].String() != want[1].String() {
					t.Errorf("%s %q: exit %d, stdout %q, stderr %q; the whole grammar: exit %d, stdout %q, stderr %q",
						spec().Name, args, gotCode, got[0].String(), got[1].String(), wantCode, want[0].String(), want[1].String())
				}
			}
		}
	}
}

// TestToolsCompletion asks the tools' bash completion scripts what the
// docs type: the default command's flags and their values without the
// command word (pg-loop --task X, pg-dash --team T), and a flag's value
// that reads like a command name.
func TestToolsCompletion(t *testing.T) {
	specs := map[string]func() *cli.Spec{"pg-dash": pgdash.Spec, "pg-llm": pgllm.Spec, "pg-loop": pgloop.Spec, "pg-queue": pgqueue.Spec}
	for _, tc := range []struct{ line, want string }{
		{"pg-loop --gu", "--guard"},
		{"pg-loop --guard ", "off warn strict"},
		{"pg-loop --task x --guard st", "strict"},
		{"pg-loop run --guard ", "off warn strict"},
		{"pg-loop se", "serve sessions"},
		{"pg-dash --on", "--once"},
		{"pg-dash --view ", "overview worker tasks"},
		{"pg-dash -t demo --vi", "--view"},
		{"pg-llm --sys", "--system"},
		{"pg-queue --team add cl", "claim"},
		{"pg-queue --team add add --pri", "--priority"},
	} {
		tool := strings.Fields(tc.line)[0]
		var out, errb bytes.Buffer
		if code := cli.Run(context.Background(), specs[tool](), []string{"completion", "bash"}, cli.Test(nil, &out, &errb)); code != 0 {
			t.Fatalf("%s completion bash: exit %d: %s", tool, code, errb.String())
		}
		if got, _ := cli.BashComplete(t, out.String(), "_"+strings.ReplaceAll(tool, "-", "_"), tc.line); got != tc.want {
			t.Errorf("%q<Tab>: got %q, want %q", tc.line, got, tc.want)
		}
	}
}
