package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/powerglide/powerglide/pkg/cmd/pgmonitor"
	"github.com/rogpeppe/go-internal/testscript"
)

func init() { tools["pg-monitor"] = pgmonitor.Spec }

// TestPgMonitor runs testdata/script/pg-monitor. The model and tool
// stand-ins of pg-loop's scripts (testdata/loop-doubles) are on PATH, so a
// script can supervise real pg-loop workers over the real pg-queue.
func TestPgMonitor(t *testing.T) {
	p := Params(scriptDir("pg-monitor"))
	setup := p.Setup
	doubles, err := filepath.Abs(filepath.Join("..", "..", "testdata", "loop-doubles"))
	if err != nil {
		t.Fatal(err)
	}
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		if _, err := os.Stat(doubles); err == nil {
			env.Setenv("PATH", doubles+string(os.PathListSeparator)+env.Getenv("PATH"))
		}
		return nil
	}
	testscript.Run(t, p)
}
