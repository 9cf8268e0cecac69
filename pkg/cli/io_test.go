package cli

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPollable: a pipe is opened again non-blocking, so reads wait in the
// runtime's poller (and a deadline works on them); what is written comes
// through to the end; the original descriptor keeps its blocking mode,
// which others holding it share. Anything else is returned as it is.
func TestPollable(t *testing.T) {
	// A blocking pipe, as a process's stdin is (os.Pipe's would be in the
	// poller already).
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	defer r.Close()
	in := Pollable(r)
	f, ok := in.(*os.File)
	if !ok || f == r {
		t.Fatalf("Pollable(pipe) = %T %v, want a new file", in, in)
	}
	defer f.Close()
	if err := f.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatalf("the reopened pipe is not in the poller: %v", err)
	}
	if _, err := f.Read(make([]byte, 1)); !os.IsTimeout(err) {
		t.Fatalf("read with nothing written: %v, want a timeout", err)
	}
	_ = f.SetReadDeadline(time.Time{})
	go func() {
		_, _ = w.WriteString("line 1\nline 2\n")
		w.Close()
	}()
	b, err := io.ReadAll(f)
	if err != nil || string(b) != "line 1\nline 2\n" {
		t.Fatalf("read %q, %v", b, err)
	}
	fl, err := unix.FcntlInt(uintptr(fds[0]), unix.F_GETFL, 0)
	if err != nil || fl&unix.O_NONBLOCK != 0 {
		t.Errorf("the original descriptor's flags: %#x, %v; want it blocking", fl, err)
	}

	sr := strings.NewReader("x")
	if Pollable(sr) != io.Reader(sr) {
		t.Error("a reader that is not a file changed")
	}
	dev, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if Pollable(dev) != io.Reader(dev) {
		t.Error("a file that is not a pipe changed")
	}
}
