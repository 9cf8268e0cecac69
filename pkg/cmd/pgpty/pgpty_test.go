package pgpty

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/cli"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	home := t.TempDir()
	code := cli.Run(context.Background(), Spec(), args, cli.Test(nil, &out, &errb, "HOME="+home, "POWERGLIDE_HOME="+home+"/pg", "PATH=/usr/bin:/bin"))
	return code, out.String(), errb.String()
}

// Bad command lines are usage errors (exit 2) that change nothing.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args   []string
		stderr string
	}{
		{[]string{"run"}, "pg-pty: error: "},
		{[]string{"run", "--cols", "0", "--", "true"}, "invalid terminal size 0x24"},
		{[]string{"run", "--timeout", "soon", "--", "true"}, "--timeout"},
		{[]string{"start", "x"}, "pg-pty: error: "},
		{[]string{"start", "bad/name", "--", "true"}, "invalid session name \"bad/name\""},
		{[]string{"kill", "x", "--signal", "NOPE"}, "--signal: invalid signal \"NOPE\""},
		{[]string{"read", "x", "--wait", "("}, "--wait: error parsing regexp"},
		{[]string{"resize", "x", "--cols", "80"}, "missing flags: --rows"},
		{[]string{"send", "x", "--keys", "Nope"}, "unknown key \"Nope\""},
		{[]string{"send", "x"}, "nothing to send"},
	}
	for _, c := range cases {
		code, _, errs := run(t, c.args...)
		if code != cli.ExitUsage || !strings.Contains(errs, c.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.stderr)
		}
	}
}

func TestUnknownSessionIsFailure(t *testing.T) {
	for _, cmd := range [][]string{{"status", "nope"}, {"read", "nope"}, {"screen", "nope"}, {"wait", "nope"}, {"kill", "nope"}, {"send", "nope", "x"}, {"resize", "nope", "--cols", "1", "--rows", "1"}, {"clean", "nope"}} {
		code, _, errs := run(t, cmd...)
		if code != cli.ExitFailure || errs != "pg-pty: error: no session nope\n" {
			t.Errorf("%v: exit %d, stderr %q", cmd, code, errs)
		}
	}
}

func TestHelpAndSchema(t *testing.T) {
	code, out, _ := run(t, "read", "--help")
	if code != 0 || !strings.Contains(out, "expect-style") || !strings.Contains(out, "$ pg-pty read") {
		t.Fatalf("read --help: %d %q", code, out)
	}
	code, out, _ = run(t, "schema", "pty-output")
	if code != 0 || !strings.Contains(out, `"next_offset"`) {
		t.Fatalf("schema: %d %q", code, out)
	}
	code, out, _ = run(t, "list", "--json")
	if code != 0 || out != "" {
		t.Fatalf("empty list: %d %q", code, out)
	}
}
