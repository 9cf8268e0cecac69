// Package proctest runs tests that send signals inside a PID namespace of
// their own, so that a regression (a kill of pid -1, of a group the test
// did not start) can only reach the test's own processes, never the
// machine that runs it.
package proctest

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

const envInside = "POWERGLIDE_TEST_PIDNS"

// Inside reports whether this test binary runs in the namespace made by
// InNamespace.
func Inside() bool { return os.Getenv(envInside) == "1" }

// InNamespace makes the calling test run inside a new PID namespace
// (unshare --pid --fork --mount-proc): outside one, it runs this test
// again in a new one, reports its output and returns false, and the
// caller returns; inside, it returns true and the test goes on. Where no
// namespace can be made (no unshare, no privilege) the test is skipped,
// and fails under CI=true.
//
//	func TestX(t *testing.T) {
//		if !proctest.InNamespace(t) {
//			return
//		}
//		...
//	}
func InNamespace(t *testing.T) bool {
	t.Helper()
	if Inside() {
		if os.Getpid() != 1 {
			t.Fatalf("%s is set but this is pid %d, not the namespace's first process", envInside, os.Getpid())
		}
		return true
	}
	if strings.Contains(t.Name(), "/") {
		t.Fatal("proctest.InNamespace is for top-level tests")
	}
	unshare, err := exec.LookPath("unshare")
	if err == nil {
		err = exec.Command(unshare, "--pid", "--fork", "--mount-proc", "true").Run()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot make a PID namespace for a signal test (unshare --pid --fork --mount-proc): %v", err)
		}
		t.Skipf("no PID namespace for a signal test (unshare --pid --fork --mount-proc): %v", err)
	}
	args := []string{"--pid", "--fork", "--mount-proc", "--kill-child", os.Args[0],
		"-test.run", "^" + regexp.QuoteMeta(t.Name()) + "$", "-test.count=1", "-test.v"}
	cmd := exec.CommandContext(t.Context(), unshare, args...)
	cmd.Env = append(os.Environ(), envInside+"=1")
	// A session (and process group) of its own: process groups span PID
	// namespaces, and a kill(0) or kill(-pgid) inside must not reach the
	// go command and the shell that run this test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("in a new PID namespace:\n%s", out.String())
	if err != nil {
		t.Fatalf("the test failed in its PID namespace: %v", err)
	}
	if !bytes.Contains(out.Bytes(), []byte("--- PASS: "+t.Name())) {
		t.Fatalf("the test did not pass in its PID namespace")
	}
	return false
}
