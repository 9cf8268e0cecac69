package proc

import (
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Raise ends the calling process by sig, as a program that sig ended
// ends: for a wrapper (pg-tool sandbox-exec) to pass on how the program
// it ran ended, so that whoever waits for it sees the signal, not 128+n.
// It returns only when sig does not end a process (or the process is
// PID 1 of a namespace, which no signal of its own ends).
//
// The signal goes to the calling thread alone: the kernel delivers it
// before the call returns, so the process ends here rather than at some
// later point while it goes on to exit with a code of its own.
func Raise(sig syscall.Signal) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	signal.Reset(sig)
	_ = unix.Tgkill(unix.Getpid(), unix.Gettid(), sig)
}
