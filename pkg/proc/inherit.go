package proc

import (
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// CloseOnExecInherited marks every descriptor from 3 up close-on-exec in
// this process, so that a program it starts gets only the descriptors it
// is given (stdin, stdout, stderr and exec.Cmd.ExtraFiles, which exec
// passes explicitly). A descriptor this process inherited from its parent
// without close-on-exec (a file open for writing, a socket, the write end
// of a shell's pipe, a make jobserver pipe) would otherwise reach it: a
// sandboxed command could use it past the sandbox's checks, and a detached
// store agent would hold a pipe open for as long as it runs. This process
// keeps them open; Go opens its own files close-on-exec.
func CloseOnExecInherited() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Before Linux 5.11: one by one.
	ents, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return err
	}
	for _, e := range ents {
		fd, aerr := strconv.Atoi(e.Name())
		if aerr != nil || fd < 3 {
			continue
		}
		// The directory's own descriptor is closed by now: EBADF.
		if _, ferr := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); ferr != nil && ferr != unix.EBADF {
			return ferr
		}
	}
	return nil
}
