package e2e

import (
	"testing"
)

// TestSwarm runs testdata/script/swarm: the whole stack at once, pg-monitor
// supervising several real pg-loop workers over the real pg-queue, with
// faults injected into real processes (kill -9, a hung model call). The
// model and tools are pg-loop's stand-ins (testdata/loop-doubles) or
// doubles the scripts carry.
func TestSwarm(t *testing.T) {
	t.Parallel()
	runTestscript(t, withLoopDoubles(t, Params(scriptDir("swarm"))))
}
