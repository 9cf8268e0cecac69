package sandbox

import (
	"os/exec"
	"testing"
)

// BenchmarkStart runs /bin/true in the sandbox, as a bash call's command
// is started: what the sandbox adds to each command.
func BenchmarkStart(b *testing.B) {
	dir := b.TempDir()
	sb, err := New(Policy{Mode: WorkspaceWrite, Root: dir, Home: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	if err := sb.Err(); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		cmd := exec.Command("/bin/true")
		if err := sb.Start(cmd); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}
