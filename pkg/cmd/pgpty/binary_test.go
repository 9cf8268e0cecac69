package pgpty

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The built binary's holder comes up through main's fast path (no kong,
// no configuration): a session started by it works end to end.
func TestBinaryHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pg-pty")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "pg-pty")
	build := exec.Command("go", "build", "-o", bin, "github.com/powerglide/powerglide/cmd/pg-pty")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	env := append(os.Environ(), "POWERGLIDE_HOME="+filepath.Join(dir, "home"), "XDG_CONFIG_HOME="+dir)
	pgpty := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { pgpty("clean", "--force") })
	if out, err := pgpty("start", "b", "--", "sh", "-c", "read line; echo got $line; exit 3"); err != nil {
		t.Fatalf("start: %v %s", err, out)
	}
	status, err := pgpty("status", "b", "--json")
	if err != nil || !strings.Contains(status, `"status":"running"`) {
		t.Fatalf("status: %v %s", err, status)
	}
	if out, err := pgpty("send", "b", "hello\n"); err != nil {
		t.Fatalf("send: %v %s", err, out)
	}
	out, err := pgpty("wait", "b")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("wait: %v %s", err, out)
	}
	if out, err := pgpty("read", "b", "--since", "0"); err != nil || !strings.Contains(out, "got hello") {
		t.Fatalf("read: %v %q", err, out)
	}
}
