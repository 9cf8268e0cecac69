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
	p := Params(scriptDir("pg-loop"))
	setup := p.Setup
	doubles, err := filepath.Abs(filepath.Join("..", "..", "testdata", "loop-doubles"))
	if err != nil {
		t.Fatal(err)
	}
	p.Cmds["fakellm"] = cmdFakeLLM
	p.Cmds["fakellm-requests"] = cmdFakeLLMRequests
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		if _, err := os.Stat(doubles); err != nil {
			return err
		}
		env.Setenv("PATH", doubles+string(os.PathListSeparator)+env.Getenv("PATH"))
		return nil
	}
	testscript.Run(t, p)
}
