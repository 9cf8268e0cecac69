package e2e

import (
	"testing"

	"github.com/powerglide/powerglide/pkg/cmd/pgdash"
)

func init() { tools["pg-dash"] = pgdash.Spec }

func TestPgDash(t *testing.T) {
	t.Parallel()
	runScripts(t, "pg-dash")
}
