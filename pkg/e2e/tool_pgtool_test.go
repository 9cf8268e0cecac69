package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgtool"
	"github.com/rogpeppe/go-internal/testscript"
)

// The scripts' pg-tool takes its test hooks from the environment, which
// the real binary never reads: POWERGLIDE_SANDBOX_TEST_DISABLE (landlock,
// seccomp, userns, comma-separated) makes those mechanisms look missing.
func init() {
	tools["pg-tool"] = func() *cli.Spec {
		var h pgtool.Hooks
		if v := os.Getenv("POWERGLIDE_SANDBOX_TEST_DISABLE"); v != "" {
			h.SandboxMissing = strings.Split(v, ",")
		}
		return pgtool.SpecWith(h)
	}
}

// TestPgTool runs testdata/script/pg-tool. Scripts get $MCPBIN (the npm
// MCP servers and the MCP Inspector installed by scripts/test-deps.sh; the condition [mcp] says
// whether they are there), $REPO (the repository root) and the test's Go build cache, so the edit veto's
// real `go build` does not rebuild the standard library.
func TestPgTool(t *testing.T) {
	t.Parallel()
	p := Params(scriptDir("pg-tool"))
	mcpBin, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "mcp", "node_modules", ".bin"))
	_, npmErr := exec.LookPath("npm")
	haveMCP := fileExists(filepath.Join(mcpBin, "mcp-server-everything")) && fileExists(filepath.Join(mcpBin, "mcp-server-filesystem")) &&
		fileExists(filepath.Join(mcpBin, "mcp-inspector"))
	if !haveMCP {
		switch {
		case os.Getenv("POWERGLIDE_TEST_NO_NPM") == "1":
			t.Logf("POWERGLIDE_TEST_NO_NPM=1: the pg-tool MCP scripts are skipped")
		case npmErr != nil:
			t.Errorf("npm is not installed, so the MCP test servers are missing: install nodejs/npm and run scripts/test-deps.sh, or set POWERGLIDE_TEST_NO_NPM=1 to skip the MCP scripts")
		default:
			t.Errorf("the MCP test servers are not installed in %s: run scripts/test-deps.sh (make test does), or set POWERGLIDE_TEST_NO_NPM=1 to skip the MCP scripts", mcpBin)
		}
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	p.Cmds["mcpserver"] = cmdMCPServer
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		env.Setenv("MCPBIN", mcpBin)
		env.Setenv("REPO", repo)
		env.Setenv("GOFLAGS", "-mod=mod")
		return nil
	}
	p.Condition = func(cond string) (bool, error) {
		if cond == "mcp" {
			return haveMCP, nil
		}
		return condition(cond)
	}
	runTestscript(t, p)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
