package pty

import (
	"context"
	"os"
	"testing"
)

// The test binary doubles as the session holder: Start runs it again with
// holderEnv set, as pg-pty runs itself with its hidden _holder command.
const holderEnv = "PG_PTY_TEST_HOLDER"

func TestMain(m *testing.M) {
	if os.Getenv(holderEnv) == "1" {
		err := Hold(context.Background(), os.Args[len(os.Args)-1], os.Stdin, os.NewFile(3, "ready"), os.Stderr)
		if err != nil {
			os.Stderr.WriteString("holder: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
