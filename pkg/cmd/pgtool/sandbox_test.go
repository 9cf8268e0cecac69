package pgtool

import (
	"bytes"
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/protocol"
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

// TestSandboxHomes (LOW-6): with HOME unset the secrets of the passwd
// entry's home are denied, with HOME elsewhere those of both homes, and a
// sandbox with no home at all is refused (exit 2, one line) rather than
// run with no home secret denied.
func TestSandboxHomes(t *testing.T) {
	root := t.TempDir()
	mkhome := func() string {
		h := t.TempDir()
		if err := os.MkdirAll(filepath.Join(h, ".ssh"), 0o700); err != nil {
			t.Fatal(err)
		}
		return h
	}
	home, account := mkhome(), mkhome()
	passwd := func(dir string, err error) Hooks {
		return Hooks{Account: func() (*user.User, error) { return &user.User{Uid: "1", HomeDir: dir}, err }}
	}
	run := func(h Hooks, args []string, env ...string) (string, string, int) {
		var out, errb bytes.Buffer
		env = append(env, "POWERGLIDE_HOME="+filepath.Join(root, ".pg"), "XDG_CONFIG_HOME="+filepath.Join(root, ".config"), "PATH=/usr/bin:/bin")
		code := cli.Main(SpecWith(h), append([]string{"--root", root}, args...), cli.Test(nil, &out, &errb, env...))
		return out.String(), errb.String(), code
	}
	hidden := func(out string) []string {
		var r protocol.SandboxReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return r.Hidden
	}
	for _, c := range []struct {
		name string
		h    Hooks
		env  []string
		want []string
	}{
		{"HOME unset", passwd(account, nil), nil, []string{account}},
		{"HOME relative", passwd(account, nil), []string{"HOME=rel"}, []string{account}},
		{"HOME elsewhere", passwd(account, nil), []string{"HOME=" + home}, []string{home, account}},
		{"HOME is the account's", passwd(home, nil), []string{"HOME=" + home}, []string{home}},
		{"no passwd entry", passwd("", user.UnknownUserIdError(1)), []string{"HOME=" + home}, []string{home}},
	} {
		out, errs, code := run(c.h, []string{"sandbox"}, c.env...)
		if code != 0 {
			t.Errorf("%s: exit %d, %s", c.name, code, errs)
			continue
		}
		var homes []string
		for _, p := range hidden(out) {
			if filepath.Base(p) == ".ssh" {
				homes = append(homes, filepath.Dir(p))
			}
		}
		slices.Sort(homes)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(homes, want) {
			t.Errorf("%s: the .ssh of %v hidden, want %v", c.name, homes, want)
		}
	}
	for _, env := range [][]string{nil, {"HOME=rel"}} {
		out, errs, code := run(passwd("", user.UnknownUserIdError(1)), []string{"call", "bash", `{"command":"echo ran"}`}, env...)
		if code != cli.ExitUsage || strings.Contains(out, "ran") || strings.Count(errs, "\n") != 1 ||
			!strings.HasPrefix(errs, "pg-tool: error: sandbox: cannot find the home directory") {
			t.Errorf("no home (%v): exit %d, %q, %q; want exit 2 and one line", env, code, out, errs)
		}
	}
	if _, errs, code := run(passwd("", user.UnknownUserIdError(1)), []string{"--sandbox", "off", "sandbox"}); code != 0 {
		t.Errorf("no home, --sandbox off: exit %d, %s", code, errs)
	}
}
