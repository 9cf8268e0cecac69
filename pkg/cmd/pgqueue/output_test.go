package pgqueue

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// A claim whose reader went away before the task record could be written
// (a pipe closed at its far end: EPIPE, SIGPIPE) is given back, as one
// written to a full disk is: the process is not ended by the signal
// before it can undo the claim.
func TestClaimIntoBrokenPipeIsReleased(t *testing.T) {
	tm := newTeam(t, "pipe")
	if _, code := tm.run("", "add", "one", "--id", "one", "--max-attempts", "1"); code != 0 {
		t.Fatalf("add: exit %d", code)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // nobody will ever read the record
	c := tm.cmd("", "claim", "--worker", "1")
	var errb bytes.Buffer
	c.Stdout, c.Stderr = w, &errb
	err = c.Run()
	w.Close()
	if c.ProcessState == nil || c.ProcessState.ExitCode() != 1 {
		t.Fatalf("claim into a broken pipe: %v (%v), stderr %q; want exit 1", err, c.ProcessState, errb.String())
	}
	if got := errb.String(); !strings.HasPrefix(got, "pg-queue: error: write stdout: ") || !strings.Contains(got, "broken pipe; the claim of one was released") {
		t.Errorf("stderr %q", got)
	}
	out, code := tm.run("", "show", "one")
	if code != 0 || !strings.Contains(out, `"status":"pending"`) || !strings.Contains(out, `"attempts":0`) {
		t.Fatalf("after the lost claim: exit %d %s", code, out)
	}
	if out, code := tm.run("", "claim", "--worker", "2"); code != 0 || !strings.Contains(out, `"worker":"2"`) {
		t.Fatalf("the task cannot be claimed again: exit %d %s", code, out)
	}
}
