// Package testenv says what a test may do when a program it needs is not
// installed: skip on a developer's machine, where the test names what to
// install, and fail under CI=true, where a skipped test would be a test
// that silently did not run.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// CI reports whether the tests run under CI=true.
func CI() bool { return os.Getenv("CI") == "true" }

// Missing returns nil when the program is on PATH, else an error naming it
// and where it comes from (hint, e.g. "scripts/test-deps.sh installs it").
func Missing(program, hint string) error {
	if _, err := exec.LookPath(program); err != nil {
		return fmt.Errorf("%s is not installed (%s)", program, hint)
	}
	return nil
}

// Need skips the test when one of the programs is not on PATH, or fails it
// under CI=true.
func Need(t testing.TB, hint string, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if err := Missing(p, hint); err != nil {
			if CI() {
				t.Fatalf("%v; under CI=true a test that needs it fails instead of skipping", err)
			}
			t.Skip(err)
		}
	}
}

// Unavailable skips the test, or fails it under CI=true, when what it
// needs of the machine (a namespace, a kernel feature) could not be had:
// err says why.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if CI() {
		t.Fatalf("%s: %v; under CI=true a test that needs it fails instead of skipping", what, err)
	} else {
		t.Skipf("%s: %v", what, err)
	}
}

// OtherUsersProcess starts `sleep 60` as uid and gid 65534 (nobody), in a
// session of its own, and ends it when the test ends: a live process that
// is not this user's. It needs root; without it the test is Unavailable.
func OtherUsersProcess(t *testing.T) *exec.Cmd {
	t.Helper()
	if os.Getuid() != 0 {
		Unavailable(t, "running a process as uid 65534", errors.New("not root"))
	}
	c := exec.Command("sleep", "60")
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: OtherUID, Gid: OtherUID}}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

// OtherUID is the user the helpers above and below act as: nobody.
const OtherUID = 65534

// AsOtherUser runs a program as uid and gid 65534 (nobody) to its end, and
// fails the test when it fails: a file or directory that another user
// really made. It needs root; without it the test is Unavailable.
func AsOtherUser(t *testing.T, name string, args ...string) {
	t.Helper()
	if os.Getuid() != 0 {
		Unavailable(t, "running a program as uid 65534", errors.New("not root"))
	}
	c := exec.Command(name, args...)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: OtherUID, Gid: OtherUID}}
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%s %v as uid %d: %v\n%s", name, args, OtherUID, err, out)
	}
}

// GiveToOtherUser makes path owned by uid and gid 65534 (nobody). It needs
// root; without it the test is Unavailable.
func GiveToOtherUser(t *testing.T, path string) {
	t.Helper()
	if os.Getuid() != 0 {
		Unavailable(t, "giving a file to uid 65534", errors.New("not root"))
	}
	if err := os.Lchown(path, OtherUID, OtherUID); err != nil {
		t.Fatal(err)
	}
}
