package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/powerglide/powerglide/pkg/cmd/pgloop"
	"github.com/rogpeppe/go-internal/testscript"
)

func init() { tools["pg-loop"] = pgloop.Spec }

// TestPgLoop runs testdata/script/pg-loop with the shell-script stand-ins
// for pg-llm, pg-tool and pg-queue (testdata/loop-doubles: fake-llm,
// fake-tool, fake-queue) on PATH.
func TestPgLoop(t *testing.T) {
	t.Parallel()
	p := withLoopDoubles(t, Params(scriptDir("pg-loop")))
	p.Cmds["fakellm"] = cmdFakeLLM
	p.Cmds["fakellm-requests"] = cmdFakeLLMRequests
	runTestscript(t, p)
}

// withLoopDoubles puts pg-loop's stand-ins for its components
// (testdata/loop-doubles: fake-llm, fake-tool, fake-queue) first on the
// scripts' PATH, so a script can run real pg-loop workers without a model.
func withLoopDoubles(t *testing.T, p testscript.Params) testscript.Params {
	t.Helper()
	doubles, err := filepath.Abs(filepath.Join("..", "..", "testdata", "loop-doubles"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(doubles); err != nil {
		t.Fatal(err)
	}
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if setup != nil {
			if err := setup(env); err != nil {
				return err
			}
		}
		env.Setenv("PATH", doubles+string(os.PathListSeparator)+env.Getenv("PATH"))
		return nil
	}
	return p
}
