package monitor

import (
	"os"
	"strconv"
	"syscall"

	"github.com/powerglide/powerglide/pkg/proc"
)

// A watch pass reads every recorded process's /proc/<pid>/stat (and the
// file store every worker record, see teamdir.Workers); with hundreds of
// workers the syscalls dominate, so they are read with a reused buffer in
// as few calls as possible (open, read, close).

// reader reads small files into a reused buffer.
type reader struct {
	buf    []byte
	guards proc.Guards // the ancestry, read once a pass
}

func (r *reader) read(path string) ([]byte, error) {
	if r.buf == nil {
		r.buf = make([]byte, 16*1024)
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	for err == syscall.EINTR {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	n := 0
	for {
		if n == len(r.buf) {
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		m, err := syscall.Read(fd, r.buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m <= 0 {
			return r.buf[:n], nil
		}
		n += m
		// A short read of a regular file or a /proc seq file is its end:
		// the records are replaced atomically, never written in place.
		if n < len(r.buf) {
			return r.buf[:n], nil
		}
	}
}

// matches is proc.Matches over the reused buffer.
func (r *reader) matches(pid int, start string) bool {
	if pid <= 0 || start == "" {
		return false
	}
	b, err := r.read("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	st, err := proc.ParseStat(b)
	return err == nil && st.Start == start && st.Alive()
}
