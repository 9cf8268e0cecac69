package e2e

import (
	"testing"

	"github.com/powerglide/powerglide/pkg/cmd/pgmonitor"
)

func init() { tools["pg-monitor"] = pgmonitor.Spec }

// TestPgMonitor runs testdata/script/pg-monitor. The model and tool
// stand-ins of pg-loop's scripts (testdata/loop-doubles) are on PATH, so a
// script can supervise real pg-loop workers over the real pg-queue.
func TestPgMonitor(t *testing.T) {
	t.Parallel()
	runTestscript(t, withLoopDoubles(t, Params(scriptDir("pg-monitor"))))
}
