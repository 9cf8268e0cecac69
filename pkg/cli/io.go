package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// IO is the set of streams and the environment a command runs with.
// main.go builds it from the process's files; tests build it from buffers.
type IO struct {
	In     io.Reader
	Out    io.Writer
	Err    io.Writer
	InTTY  bool
	OutTTY bool
	ErrTTY bool
	Env    []string // KEY=value pairs, like os.Environ()
}

// Std builds an IO from open files, detecting which of them are terminals.
func Std(in, out, errw *os.File, env []string) *IO {
	return &IO{
		In: in, Out: out, Err: errw,
		InTTY:  isTTY(in),
		OutTTY: isTTY(out),
		ErrTTY: isTTY(errw),
		Env:    env,
	}
}

func isTTY(f *os.File) bool { return f != nil && term.IsTerminal(int(f.Fd())) }

// Test returns an IO over the given reader with buffers for output; tty
// says whether stdout claims to be a terminal.
func Test(in io.Reader, out, errw io.Writer, env ...string) *IO {
	if in == nil {
		in = strings.NewReader("")
	}
	return &IO{In: in, Out: out, Err: errw, Env: env}
}

// Getenv returns the value of key in the command's environment.
func (o *IO) Getenv(key string) string {
	v, _ := o.LookupEnv(key)
	return v
}

// LookupEnv reports the value of key in the command's environment.
func (o *IO) LookupEnv(key string) (string, bool) {
	prefix := key + "="
	// The last assignment wins, as with exec.Cmd.Env.
	for i := len(o.Env) - 1; i >= 0; i-- {
		if strings.HasPrefix(o.Env[i], prefix) {
			return o.Env[i][len(prefix):], true
		}
	}
	return "", false
}

// JSON reports whether output should be JSON Lines: forced by --json, or
// whenever stdout is not a terminal.
func (o *IO) JSON(forced bool) bool { return forced || !o.OutTTY }

// Pollable returns r, or when r is a file on a pipe, the same pipe opened
// again non-blocking (through /proc/self/fd): a read then waits in the Go
// runtime's poller instead of in a read system call. A goroutine blocked
// in a system call keeps the runtime's monitor thread waking every 20 µs
// to 10 ms for the first 10 ms of every wait, which a coprocess that
// waits for its next request between short bursts of work (pg-tool serve,
// pg-llm serve) pays at every request. The original descriptor is left
// as it is: its file status flags are shared with whoever else holds it.
func Pollable(r io.Reader) io.Reader {
	f, ok := r.(*os.File)
	if !ok {
		return r
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return r
	}
	g, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return r
	}
	return g
}
