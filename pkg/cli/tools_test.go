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

// TestToolsHelpShowsDefaults: a flag's --help gives its default, from its
// tag or its configuration key, where the text does not already.
func TestToolsHelpShowsDefaults(t *testing.T) {
	for _, tc := range []struct {
		spec func() *cli.Spec
		args []string
		want []string
	}{
		{pgmonitor.Spec, []string{"run", "--help"}, []string{"--max-restarts=K Restarts allowed per worker; -1 for no limit (default 5).", "(at most 30s) (default 1s)."}},
		{pgtool.Spec, []string{"serve", "--help"}, []string{"(match them by id) (default 1)."}},
		{pgloop.Spec, []string{"--help"}, []string{"are pruned (default 0.7) ($POWERGLIDE_CONTEXT_SOFT).", "before a few new messages (default 0.9) ($POWERGLIDE_CONTEXT_HARD).", `wrapped in <untrusted source="TOOL"> (default warn) ($POWERGLIDE_GUARD).`, "renewed as the heartbeat (default 10m)"}},
		{pgqueue.Spec, []string{"claim", "--help"}, []string{`$POWERGLIDE_HOME/teams/<team>/ (default "default") ($POWERGLIDE_TEAM).`}},
		{pgllm.Spec, []string{"--help"}, []string{`(default "anthropic/claude-sonnet-4-5") ($POWERGLIDE_MODEL).`}},
	} {
		var out, errb bytes.Buffer
		if code := cli.Run(context.Background(), tc.spec(), tc.args, cli.Test(nil, &out, &errb)); code != 0 {
			t.Fatalf("%s %q: exit %d: %s", tc.spec().Name, tc.args, code, errb.String())
		}
		help := strings.Join(strings.Fields(out.String()), " ")
		for _, w := range tc.want {
			if !strings.Contains(help, w) {
				t.Errorf("%s %q: no %q in:\n%s", tc.spec().Name, tc.args, w, out.String())
			}
		}
	}
}

// TestToolsHelpHasExamples: the --help of every command of the seven tools,
// and so its section of the man page, shows examples, lines "$ ..." that
// run the tool (STYLE.md §7); so does the tool's own --help.
func TestToolsHelpHasExamples(t *testing.T) {
	for _, spec := range []func() *cli.Spec{pgdash.Spec, pgllm.Spec, pgloop.Spec, pgmonitor.Spec, pgpty.Spec, pgqueue.Spec, pgtool.Spec} {
		name := spec().Name
		var out, errb bytes.Buffer
		if code := cli.Run(context.Background(), spec(), []string{"man"}, cli.Test(nil, &out, &errb)); code != 0 {
			t.Fatalf("%s man: exit %d: %s", name, code, errb.String())
		}
		page := strings.ReplaceAll(out.String(), `\-`, "-")
		head, commands, _ := strings.Cut(page, "\n.SH COMMANDS\n")
		if _, desc, _ := strings.Cut(head, "\n.SH DESCRIPTION\n"); !hasExample(desc, name) {
			t.Errorf("%s --help (the man page's DESCRIPTION) shows no example", name)
		}
		commands, _, _ = strings.Cut(commands, "\n.SH ")
		for _, section := range strings.Split(commands, ".SS ")[1:] {
			if title, _, _ := strings.Cut(section, "\n"); !hasExample(section, name) {
				t.Errorf("%s: no example in --help of %s", name, title)
			}
		}
	}
}

// hasExample reports whether text has a line "$ ..." that runs tool.
func hasExample(text, tool string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "$ ") && strings.Contains(l, tool) {
			return true
		}
	}
	return false
}
