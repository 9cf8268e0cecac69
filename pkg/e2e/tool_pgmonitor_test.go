package e2e

import (
	"testing"

	"github.com/powerglide/powerglide/pkg/cmd/pgmonitor"
)

func init() { tools["pg-monitor"] = pgmonitor.Spec }

func TestPgMonitor(t *testing.T) { runScripts(t, "pg-monitor") }
