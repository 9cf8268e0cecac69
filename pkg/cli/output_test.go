package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// A tool whose stdout cannot take its output fails, whichever command
// wrote it and whether or not the command looked at the write's error.
func TestOutputThatCannotBeWrittenFails(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("this test needs /dev/full: %v", err)
	}
	defer full.Close()
	env := []string{"HOME=" + t.TempDir()}
	for _, args := range [][]string{
		{"greet", "x"},         // checks its write
		{"schema"},             // ignores its writes (fmt.Fprintln)
		{"schema", "task"},     // one write
		{"config"},             // text table
		{"config", "--json"},   // JSON Lines
		{"--help"},             // kong's help, ended by kong.Exit
		{"--version"},          // kong's version flag
		{"completion", "bash"}, // generated script
	} {
		var errb bytes.Buffer
		code := Run(context.Background(), toySpec(), args, Test(nil, full, &errb, env...))
		if code != ExitFailure {
			t.Errorf("%v > /dev/full: exit %d, want 1 (stderr %q)", args, code, errb.String())
		}
		if got := errb.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "pg-toy: error: write stdout: ") {
			t.Errorf("%v > /dev/full: stderr %q, want one line pg-toy: error: write stdout: ...", args, got)
		}
	}
}

// A failing command keeps its own exit code and message; the lost write
// adds nothing.
func TestOutputErrorKeepsFailureCode(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("this test needs /dev/full: %v", err)
	}
	defer full.Close()
	var errb bytes.Buffer
	code := Run(context.Background(), toySpec(), []string{"fail", "3", "--json"}, Test(nil, full, &errb, "HOME="+t.TempDir()))
	if code != ExitNothing || errb.String() != "pg-toy: error: no claimable task\n" {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}

type failAfter struct {
	n   int
	buf bytes.Buffer
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.buf.Len()+len(p) > f.n {
		return 0, os.ErrClosed
	}
	return f.buf.Write(p)
}

// After the first failed write nothing more is written, so a reader never
// sees a record that follows a lost one.
func TestOutputStopsAtFirstError(t *testing.T) {
	w := &failAfter{n: 5}
	o := &output{w: w}
	o.Write([]byte("abc\n"))
	if _, err := o.Write([]byte("defgh\n")); err == nil {
		t.Fatal("second write succeeded")
	}
	if _, err := o.Write([]byte("i\n")); err == nil || OutputErr(o) == nil {
		t.Fatalf("third write: %v, remembered %v", err, OutputErr(o))
	}
	if w.buf.String() != "abc\n" {
		t.Errorf("written %q", w.buf.String())
	}
	if Terminal(o) != w {
		t.Error("Terminal does not unwrap")
	}
}

type toyPanic struct{}

func (toyPanic) Run(*Runtime) error { panic("boom") }

// A panic is a bug, a runtime failure: exit 1, never 2, which means bad
// input and nothing else.
func TestPanicIsNotBadInput(t *testing.T) {
	spec := &Spec{Name: "pg-toy", Description: "A toy.", CLI: &struct {
		Boom toyPanic `cmd:"" help:"Panic."`
	}{}}
	var out, errb bytes.Buffer
	code := Run(context.Background(), spec, []string{"boom"}, Test(nil, &out, &errb))
	if code != ExitFailure || !strings.HasPrefix(errb.String(), "pg-toy: error: internal error: boom\n") || !strings.Contains(errb.String(), "goroutine") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

type toyEscape struct {
	JSON bool `help:"JSON errors."`
}

func (toyEscape) Run(*Runtime) error { return errors.New("task \x1b]0;pwned\x07 failed") }

// The error line on stderr, most often a terminal, shows escapes; the JSON
// record keeps the message exact.
func TestErrorLineShowsEscapes(t *testing.T) {
	spec := &Spec{Name: "pg-toy", Description: "A toy.", CLI: &struct {
		Esc toyEscape `cmd:"" help:"Fail with an escape."`
	}{}}
	var out, errb bytes.Buffer
	Run(context.Background(), spec, []string{"esc", "--json"}, Test(nil, &out, &errb))
	if errb.String() != "pg-toy: error: task ^[]0;pwned^G failed\n" {
		t.Errorf("stderr %q", errb.String())
	}
	if !strings.Contains(out.String(), `"message":"task \u001b]0;pwned\u0007 failed"`) {
		t.Errorf("JSON record %q", out.String())
	}
}
