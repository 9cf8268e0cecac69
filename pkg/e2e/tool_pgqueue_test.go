package e2e

import (
	"testing"

	"github.com/powerglide/powerglide/pkg/cmd/pgqueue"
)

func init() { tools["pg-queue"] = pgqueue.Spec }

func TestPgQueue(t *testing.T) {
	t.Parallel()
	runScripts(t, "pg-queue")
}
