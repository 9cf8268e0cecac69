package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs testdata/script/scripts: the shell scripts of scripts/
// (swarm.sh, pipeline.sh, the cron worker, the pg-llm swap) against the
// real tools, which testscript puts on PATH. $REPO is the repository root,
// so a script reaches scripts/ and testdata/.
func TestScripts(t *testing.T) {
	t.Parallel()
	p := Params(scriptDir("scripts"))
	setup := p.Setup
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(root, "scripts", "swarm.sh")); err != nil {
			return err
		}
		env.Setenv("REPO", root)
		return nil
	}
	testscript.Run(t, p)
}
