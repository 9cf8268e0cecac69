// Package e2e runs the testscript end-to-end tests in testdata/script: every
// pg-* tool is registered as a command, so scripts pipe the real tools into
// each other. Each tool registers itself in a file of its own
// (tool_<name>_test.go) by adding its Spec to tools.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/internal/testenv"
	"github.com/rogpeppe/go-internal/testscript"
)

// tools maps a binary name to the Spec its main.go runs.
var tools = map[string]func() *cli.Spec{}

func TestMain(m *testing.M) {
	cmds := map[string]func(){}
	for name, spec := range tools {
		cmds[name] = func() {
			os.Exit(cli.Main(spec(), os.Args[1:], cli.Std(os.Stdin, os.Stdout, os.Stderr, os.Environ())))
		}
	}
	testscript.Main(m, cmds)
}

// scriptDir is where the txtar scripts of one tool live.
func scriptDir(name string) string {
	return filepath.Join("..", "..", "testdata", "script", name)
}

// runScripts runs every script in testdata/script/<dir>.
func runScripts(t *testing.T, dir string) {
	t.Helper()
	runTestscript(t, Params(scriptDir(dir)))
}

// runTestscript runs scripts with their work directories under the test's
// own temporary directory, which the test removes: testscript's default
// root, a go-test-script directory in TMPDIR, is left behind by every run.
func runTestscript(t *testing.T, p testscript.Params) {
	t.Helper()
	if p.WorkdirRoot == "" {
		p.WorkdirRoot = t.TempDir()
	}
	testscript.Run(t, p)
}

// Params are the testscript settings every script runs with: a private
// home, data root and config dir, so no test reads the user's files.
func Params(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			home := filepath.Join(env.WorkDir, ".home")
			env.Setenv("HOME", home)
			env.Setenv("POWERGLIDE_HOME", filepath.Join(home, ".powerglide"))
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
			for _, k := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "POWERGLIDE_CONFIG", "POWERGLIDE_MODEL", "POWERGLIDE_STORE"} {
				env.Setenv(k, "")
			}
			// Scripts that run go (a verify, the demo's tests) share the
			// real build and module caches: with the private HOME they
			// would start empty and compile the standard library anew.
			for k, v := range goEnv() {
				env.Setenv(k, v)
			}
			env.Setenv("GOTOOLCHAIN", "local")
			// The sandbox's own build caches (what sandboxed go commands
			// write) are shared by every run of the scripts, for the same
			// reason.
			if dir, err := os.UserCacheDir(); err == nil {
				env.Setenv("POWERGLIDE_SANDBOX_CACHE", filepath.Join(dir, "powerglide-test", "sandbox-cache"))
			}
			// The tools are this test binary, race-built under make test;
			// such a binary sleeps a second before it exits, so that
			// races in other goroutines get reported. Races are still
			// reported as they happen; the scripts run hundreds of tools.
			env.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			return os.MkdirAll(home, 0o755)
		},
		Condition: condition,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"validate":    cmdValidate,
			"descendants": cmdDescendants,
			"gone":        cmdGone,
			"private":     cmdPrivate,
			"listen":      cmdListen,
			"exits":       cmdExits,
		},
	}
}

// condition answers [have:PROG], which scripts use before skipping for a
// program they need (`[!have:jq] skip 'needs jq'`): true when PROG is on
// PATH; when it is not, false on a developer's machine, and under CI=true
// an error that fails the script, so CI never passes a script that did
// not run.
func condition(cond string) (bool, error) {
	prog, ok := strings.CutPrefix(cond, "have:")
	if !ok {
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	if err := testenv.Missing(prog, "scripts/test-deps.sh installs the programs the tests need"); err != nil {
		if testenv.CI() {
			return false, fmt.Errorf("%v; under CI=true a script that needs it fails instead of skipping", err)
		}
		return false, nil
	}
	return true, nil
}

// goEnv is the go command's caches and root, asked once.
var goEnv = sync.OnceValue(func() map[string]string {
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOROOT").Output()
	v := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(v) != 3 {
		return nil
	}
	return map[string]string{"GOCACHE": v[0], "GOMODCACHE": v[1], "GOROOT": v[2]}
})

func TestToolsRegistered(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("..", "..", "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, e := range entries {
		if _, ok := tools[e.Name()]; e.IsDir() && !ok {
			missing = append(missing, e.Name())
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("binaries under cmd/ not registered in the e2e harness: %v", missing)
	}
}
