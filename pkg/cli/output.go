package cli

import (
	"fmt"
	"io"
	"sync"
)

// output is the command's stdout as Run hands it on: it remembers the
// first write error, and after it refuses every later write with the same
// error, so a record is never written after one that was lost. Run checks
// it before it reports success: a tool whose output could not be written
// (a full disk, /dev/full, a closed pipe) exits 1, not 0.
type output struct {
	w   io.Writer
	mu  sync.Mutex
	err error
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		o.err = &WriteError{Err: err}
		return n, o.err
	}
	return n, nil
}

// Unwrap returns the writer underneath: a full-screen program (the
// dashboard's TUI) needs the terminal's file itself to size and set it up.
func (o *output) Unwrap() io.Writer { return o.w }

func (o *output) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// WriteError is a failed write to stdout.
type WriteError struct{ Err error }

func (e *WriteError) Error() string { return "write stdout: " + e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

// OutputErr reports the first error writing to w, when w is the stdout
// that Run handed to a command, or nil. A command that must undo something
// when its output was lost (pg-queue claim releases its claim) asks it.
func OutputErr(w io.Writer) error {
	if o, ok := w.(*output); ok {
		return o.failed()
	}
	return nil
}

// Terminal returns the writer under stdout for a full-screen program that
// needs the terminal's file (see output.Unwrap); other writers pass as
// they are.
func Terminal(w io.Writer) io.Writer {
	if o, ok := w.(*output); ok {
		return o.w
	}
	return w
}

// outputCode decides the exit code once the command is done: a command
// that reported success although its stdout lost a write fails (exit 1).
// A failing command's own code and message stand.
func outputCode(rt *Runtime, code int, werr error) int {
	if werr == nil || code != ExitOK {
		return code
	}
	fmt.Fprintf(rt.IO.Err, "%s: error: %s\n", rt.Spec.Name, errorLine(werr.Error()))
	return ExitFailure
}
