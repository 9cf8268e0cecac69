package e2e

import (
	"errors"
	"os/exec"
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"
)

// exitsBound is how long a command run by exits may take. It is no timed
// assertion: the commands checked this way answer at once, and the bound
// only turns a hang (an open(2) of a named pipe never returns) into a
// failure instead of a test binary stuck until go test's own timeout.
const exitsBound = "60"

// cmdExits: exits CODE PROG [ARG...] runs PROG (through coreutils'
// timeout, which kills it a minute on) and fails unless it ends by itself
// with exit code CODE. Its stdout and stderr are then the script's to
// check, as after exec.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROG [ARG...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec("timeout", append([]string{"-k", "5", exitsBound}, args[1:]...)...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
		if got == -1 { // timeout killed itself with the KILL it sent
			ts.Fatalf("%s did not end within %s s (%v)", args[1], exitsBound, ee.ProcessState)
		}
	case err != nil:
		ts.Fatalf("%s: %v", args[1], err)
	}
	if (got == 124 || got == 137) && want != got {
		ts.Fatalf("%s did not end within %s s (timeout's exit code %d)", args[1], exitsBound, got)
	}
	if got != want {
		ts.Fatalf("%s exited with code %d, want %d", args[1], got, want)
	}
}
