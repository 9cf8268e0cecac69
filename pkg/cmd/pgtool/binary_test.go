package pgtool

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/powerglide/powerglide/pkg/internal/testenv"
	"github.com/powerglide/powerglide/pkg/sandbox"
)

// The built binary's sandbox-exec starts its init through main's fast path
// (no kong): the program runs confined, its code and its signal come back
// as the program's.
func TestBinarySandboxExec(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pg-tool")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "pg-tool")
	build := exec.Command("go", "build", "-o", bin, "github.com/powerglide/powerglide/cmd/pg-tool")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ws, outside := filepath.Join(dir, "ws"), filepath.Join(dir, "outside")
	for _, d := range []string{filepath.Join(ws, ".tmp"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sb, err := sandbox.New(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Root: ws, TempDir: filepath.Join(ws, ".tmp")})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sb.Err(); err != nil {
		testenv.Unavailable(t, "the sandbox cannot be set up on this machine", err)
	}
	pol, err := json.Marshal(sb.Policy())
	if err != nil {
		t.Fatal(err)
	}
	run := func(line string) (string, *os.ProcessState) {
		cmd := exec.Command(bin, sandbox.ExecCommand, "--policy", string(pol), "--", "sh", "-c", line)
		cmd.Dir = ws
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState
	}
	out, st := run("touch " + outside + "/x; echo pid $$; exit 3")
	if st.ExitCode() != 3 || !strings.Contains(out, "Permission denied") || !strings.Contains(out, "pid ") || strings.Contains(out, "pid 1\n") {
		t.Errorf("sandbox-exec: %q, %v; want a refused write, the program below its init (not PID 1) and exit code 3", out, st)
	}
	_, st = run("kill -TERM $$")
	if ws, _ := st.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("a program ended by SIGTERM: sandbox-exec %v", st)
	}
}
