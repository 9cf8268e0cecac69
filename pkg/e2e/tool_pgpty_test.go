package e2e

import (
	"testing"

	"github.com/powerglide/powerglide/pkg/cmd/pgpty"
)

func init() { tools["pg-pty"] = pgpty.Spec }

func TestPgPty(t *testing.T) {
	t.Parallel()
	runScripts(t, "pg-pty")
}
