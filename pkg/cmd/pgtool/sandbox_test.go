package pgtool

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/cli"
)

// sandboxInfo runs `pg-tool sandbox` and returns its stdout and exit code.
func sandboxInfo(t *testing.T, spec *cli.Spec, home, root string, env ...string) (string, int) {
	t.Helper()
	env = append([]string{"HOME=" + home, "POWERGLIDE_HOME=" + home + "/.powerglide", "XDG_CONFIG_HOME=" + home + "/.config", "PATH=/usr/bin:/bin"}, env...)
	var out, errb bytes.Buffer
	code := cli.Main(spec, []string{"--root", root, "sandbox"}, cli.Test(nil, &out, &errb, env...))
	return out.String(), code
}

// The mechanisms a test makes look missing come through Hooks, never from
// the environment: the binary's pg-tool ignores the variable the e2e
// scripts use for it. Before, production code read it.
func TestSandboxTestHooks(t *testing.T) {
	missing := []string{"landlock", "seccomp", "userns"}
	home, root := t.TempDir(), t.TempDir()
	plain, plainCode := sandboxInfo(t, Spec(), home, root)
	withEnv, envCode := sandboxInfo(t, Spec(), home, root, "POWERGLIDE_SANDBOX_TEST_DISABLE="+strings.Join(missing, ","))
	tmp := regexp.MustCompile(`pg-tool-tmp-[0-9]+`) // the private TMPDIR, new each run
	norm := func(s string) string { return tmp.ReplaceAllString(s, "TMP") }
	if norm(plain) != norm(withEnv) || plainCode != envCode {
		t.Errorf("the environment changed the sandbox of the real pg-tool:\n%d %s\n%d %s", plainCode, plain, envCode, withEnv)
	}
	hooked, code := sandboxInfo(t, SpecWith(Hooks{SandboxMissing: missing}), home, root)
	if code != cli.ExitFailure || !strings.Contains(hooked, `"available":false`) {
		t.Errorf("Hooks.SandboxMissing: exit %d, %s", code, hooked)
	}
	for _, m := range []string{"landlock is not available", "seccomp filters are not available", "user namespaces are not available"} {
		if !strings.Contains(hooked, m) {
			t.Errorf("the report does not say %q: %s", m, hooked)
		}
	}
}
