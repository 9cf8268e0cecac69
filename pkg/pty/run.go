package pty

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/powerglide/powerglide/pkg/proc"
	"golang.org/x/sys/unix"
)

// RunOptions configure one run of a command under a pseudo-terminal.
type RunOptions struct {
	Command []string
	Dir     string   // working directory; "" is the caller's
	Env     []string // the child's environment
	Cols    int
	Rows    int
	// Timeout, when positive, ends the run: the child's process group gets
	// SIGTERM, then SIGKILL after KillGrace.
	Timeout   time.Duration
	KillGrace time.Duration
	// Input is forwarded to the terminal as typed input. When it ends, the
	// terminal's end-of-file character is sent, as a user typing Ctrl-D,
	// unless Interactive is set (the input is a person's terminal).
	Input       io.Reader
	Interactive bool
	// Output receives the output as it comes; nil discards it.
	Output io.Writer
	// Capture keeps up to this many bytes of output (head and tail) in the
	// result; 0 keeps none.
	Capture int
	// Stop, when it fires, forwards its signal to the child's process
	// group (the caller was interrupted); SIGKILL follows after KillGrace.
	Stop <-chan syscall.Signal
	// Resize changes the terminal's size (the caller's window changed).
	Resize <-chan [2]int
}

// RunResult is what a run ended with.
type RunResult struct {
	ExitCode    int    // the child's code, 128+n for signal n, 124 on timeout
	Signal      string // the signal that ended the child, if one did
	TimedOut    bool
	Duration    time.Duration
	Output      string // the captured output (head and tail when truncated)
	OutputBytes int64
	Truncated   bool
}

// ErrNotFound means the command could not be found or executed.
var ErrNotFound = errors.New("command not found")

// Run runs a command under a new pseudo-terminal, streams its output and
// waits for it. It ends when the child has exited and its output has been
// drained, even if a grandchild still holds the terminal open.
func Run(ctx context.Context, o RunOptions) (*RunResult, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("no command given")
	}
	if o.Cols <= 0 || o.Rows <= 0 {
		return nil, fmt.Errorf("invalid terminal size %dx%d", o.Cols, o.Rows)
	}
	if o.KillGrace <= 0 {
		o.KillGrace = 2 * time.Second
	}
	path, err := exec.LookPath(o.Command[0])
	if err != nil {
		return nil, errorf(ErrNotFound, "command not found: %s", o.Command[0])
	}
	cmd := exec.Command(path, o.Command[1:]...)
	cmd.Args[0] = o.Command[0]
	cmd.Dir = o.Dir
	cmd.Env = o.Env
	start := time.Now()
	master, err := startTerminal(cmd, o.Cols, o.Rows)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", o.Command[0], err)
	}
	defer master.Close()

	capt := newCapture(o.Capture)
	var total int64
	out := o.Output
	p := newPump(master, 64<<10, func(b []byte) {
		total += int64(len(b))
		capt.write(b)
		if out != nil {
			if _, err := out.Write(b); err != nil {
				out = nil // the reader went away; keep draining the terminal
			}
		}
	})

	exited := make(chan struct{})
	if o.Input != nil {
		go forwardInput(master, o.Input, !o.Interactive, exited)
	}

	// The program leads its session and process group: the group is
	// signalled only until the program is reaped.
	child := proc.Adopt(cmd)
	var waitErr error
	go func() {
		waitErr = child.Wait()
		close(exited)
	}()

	var timedOut bool
	var timeout <-chan time.Time
	if o.Timeout > 0 {
		t := time.NewTimer(o.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var once sync.Once
	terminate := func(sig syscall.Signal) {
		once.Do(func() {
			child.SignalGroup(sig)
			go func() {
				select {
				case <-exited:
				case <-time.After(o.KillGrace):
					child.SignalGroup(syscall.SIGKILL)
				}
			}()
		})
	}
	stop := o.Stop
	done := ctx.Done()
wait:
	for {
		select {
		case <-exited:
			break wait
		case <-timeout:
			timedOut = true
			timeout = nil
			// The whole group goes, grandchildren included, when the
			// program exits (before it is reaped).
			child.SetEndGroup()
			terminate(syscall.SIGTERM)
		case sig := <-stop:
			stop = nil
			terminate(sig)
		case sz := <-o.Resize:
			setSize(master, sz[0], sz[1])
		case <-done:
			done = nil
			terminate(syscall.SIGHUP)
		}
	}
	exitAt := time.Now()
	p.drain(exitAt)

	res := &RunResult{Duration: time.Since(start), TimedOut: timedOut}
	res.ExitCode, res.Signal = exitStatus(cmd.ProcessState)
	if cmd.ProcessState == nil && waitErr != nil {
		return nil, fmt.Errorf("wait %s: %w", o.Command[0], waitErr)
	}
	if timedOut {
		res.ExitCode = 124
	}
	res.OutputBytes = total
	res.Output, res.Truncated = capt.String()
	return res, nil
}

// forwardInput copies typed input to the terminal. At its end it types
// the end-of-file character, as a user pressing Ctrl-D: twice when the last
// line was not ended, since the first only hands the partial line over.
//
// Ctrl-D is typed only once the program has consumed the input before it:
// a program that switches the terminal to raw mode with an end-of-file
// still queued (python's readline does) would read a NUL instead.
func forwardInput(master *os.File, in io.Reader, eof bool, exited <-chan struct{}) {
	buf := make([]byte, 32<<10)
	last := byte('\n')
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if _, werr := master.Write(buf[:n]); werr != nil {
				return
			}
			last = buf[n-1]
		}
		if err != nil {
			break
		}
	}
	if !eof || !inputConsumed(master, exited) {
		return
	}
	if last != '\n' && last != '\r' {
		master.Write([]byte{4})
	}
	master.Write([]byte{4})
}

// inputConsumed waits until the terminal's input queue has stayed empty
// for a few polls (input takes a moment to reach the queue). It returns
// false when the program exits first.
func inputConsumed(master *os.File, exited <-chan struct{}) bool {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	empty := 0
	for empty < 3 {
		select {
		case <-exited:
			return false
		case <-t.C:
		}
		n, err := pendingInput(master)
		if err != nil {
			return true // cannot tell: send it anyway
		}
		if n == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	return true
}

// pendingInput is the number of bytes typed but not yet read by the
// program (in canonical mode: in complete lines), asked through a
// short-lived descriptor of the terminal's slave side.
func pendingInput(master *os.File) (int, error) {
	rc, err := master.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var ierr error
	err = rc.Control(func(fd uintptr) {
		sfd, _, e := unix.Syscall(unix.SYS_IOCTL, fd, unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
		if e != 0 {
			ierr = e
			return
		}
		defer unix.Close(int(sfd))
		n, ierr = unix.IoctlGetInt(int(sfd), unix.TIOCINQ)
	})
	if err != nil {
		return 0, err
	}
	return n, ierr
}

// capture keeps the head and the tail of a stream within max bytes.
type capture struct {
	max   int
	head  []byte
	tail  []byte
	total int64
}

func newCapture(max int) *capture { return &capture{max: max} }

func (c *capture) write(b []byte) {
	c.total += int64(len(b))
	if c.max <= 0 {
		return
	}
	half := c.max / 2
	if room := half - len(c.head); room > 0 {
		n := min(room, len(b))
		c.head = append(c.head, b[:n]...)
		b = b[n:]
	}
	if len(b) == 0 {
		return
	}
	keep := c.max - half
	c.tail = append(c.tail, b...)
	if len(c.tail) > 2*keep+4096 {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-keep:]...)
	}
}

// String returns the kept output and whether some was left out.
func (c *capture) String() (string, bool) {
	if c.max <= 0 {
		return "", c.total > 0
	}
	keep := c.max - c.max/2
	if int64(len(c.head)+len(c.tail)) == c.total && len(c.head)+len(c.tail) <= c.max {
		return string(c.head) + string(c.tail), false
	}
	tail := c.tail
	if len(tail) > keep {
		tail = tail[len(tail)-keep:]
	}
	head := trimRuneEnd(c.head)
	tail = trimRuneStart(tail)
	omitted := c.total - int64(len(head)+len(tail))
	return fmt.Sprintf("%s\n[... %d bytes omitted ...]\n%s", head, omitted, tail), true
}

// trimRuneEnd drops an incomplete UTF-8 sequence at the end of b.
func trimRuneEnd(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// trimRuneStart drops continuation bytes at the start of b.
func trimRuneStart(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && i < len(b); i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}
