package pty

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/proc/proctest"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// Issue 20: `pg-pty kill` on a hand-written session.json saying pid 1
// signalled process group -1, every process. In a PID namespace of its
// own (this test is pid 1 there), sessions naming pid 1, 0, -1 or a
// bystander with another start time signal nothing.
func TestKillHostileSessionFile(t *testing.T) {
	if !proctest.InNamespace(t) {
		return
	}
	bystander := proctest.StartBystander(t)
	bpid, bstart := bystander.PID(), bystander.Start()
	one, _ := proc.StartTime(1)
	s := Store{Root: t.TempDir()}
	for name, st := range map[string]protocol.PtySession{
		"one":     {PID: 1, PIDStart: one, HolderPID: 1, HolderStart: one},
		"zero":    {PID: 0, PIDStart: one, HolderPID: 1, HolderStart: one},
		"minus":   {PID: -1, PIDStart: one, HolderPID: 1, HolderStart: one},
		"reused":  {PID: bpid, PIDStart: bstart + "1", HolderPID: 1, HolderStart: one},
		"orphan1": {PID: 1, PIDStart: one, HolderPID: bpid, HolderStart: bstart + "1"},
	} {
		st.Type, st.Name, st.Status, st.Command = "session", name, protocol.PtyRunning, []string{"sh"}
		dir := filepath.Join(s.Root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeState(dir, &st, false); err != nil {
			t.Fatal(err)
		}
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			s.Kill(ctx, name, sig, 50*time.Millisecond)
			cancel()
		}
	}
	bystander.Check(t)
}
