package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/powerglide/powerglide/pkg/store/pgtest"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestScripts runs testdata/script/scripts: the shell scripts of scripts/
// (swarm.sh, pipeline.sh, the cron worker, the pg-llm swap) against the
// real tools, which testscript puts on PATH. $REPO is the repository root,
// so a script reaches scripts/ and testdata/.
func TestScripts(t *testing.T) {
	t.Parallel()
	runTestscript(t, scriptsParams(t, "scripts"))
}

// TestScriptsPostgres runs testdata/script/scripts-pg: the scripts, and
// pg-loop with its stand-ins (withLoopDoubles), with the team store on
// PostgreSQL. $STORE is the URL of a database of the
// script's own on a server of the test's own (pgtest: under CI=true a
// server that cannot start fails the test).
func TestScriptsPostgres(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t, pgtest.Options{})
	runTestscript(t, withDatabase(withLoopDoubles(t, scriptsParams(t, "scripts-pg")), srv, "STORE"))
}

// scriptsParams are the settings of the scripts' tests: $REPO is the
// repository root.
func scriptsParams(t *testing.T, dir string) testscript.Params {
	t.Helper()
	p := Params(scriptDir(dir))
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
	return p
}
