package pgqueue

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/internal/testnet"
	"github.com/powerglide/powerglide/pkg/store/agent"
)

// TestPrivateAgentConnectsByBegan: a private store agent (pg-queue agent
// --stdio, pg-loop's fallback when the host's agent could not reach the
// server) gets only what is left of the connect timeout its client began
// (agent.BeganEnv), not all of it again.
func TestPrivateAgentConnectsByBegan(t *testing.T) {
	addr, stop, err := testnet.Silent() // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	home := t.TempDir()
	began := time.Now().Add(-29 * time.Second)
	var out, errb bytes.Buffer
	io := cli.Test(strings.NewReader(""), &out, &errb, "HOME="+home, "POWERGLIDE_HOME="+home,
		"POWERGLIDE_STORE=postgres://u@"+addr+"/pg?connect_timeout=30",
		agent.BeganEnv+"="+strconv.FormatInt(began.UnixNano(), 10))
	start := time.Now()
	code := cli.Run(context.Background(), Spec(), []string{"agent", "--stdio"}, io)
	if code != cli.ExitTimeout || !strings.Contains(errb.String(), "no answer within 30s (connect_timeout)") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the private agent waited %s of a timeout 29 s spent", d)
	}
}
