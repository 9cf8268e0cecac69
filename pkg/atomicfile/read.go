package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// RecordLimit is the most ReadFile reads of a small record: a worker
// record (worker-<n>.json), a velocity, an approval, budget.json. The
// largest of them, budget.json, holds one reservation of about 300 bytes
// per model call in flight, so 1 MiB is over 3,000 calls in flight, and a
// worker record is a few KiB at most (its approval input is cut to 2,000
// characters); yet a watch pass that reads a record of every worker into
// one buffer stays small whatever a file holds.
const RecordLimit = 1 << 20

// IrregularError is a file that is not a regular file: a named pipe, a
// device, a socket, a directory or a symbolic link. The files the tools
// keep are regular files, replaced by rename; anything else was put there
// by someone else, and reading it could block for ever (a pipe with no
// writer), never end (/dev/zero) or read a file that is not ours (a link).
type IrregularError struct {
	Path string
	Kind string // "a named pipe (FIFO)", "a symbolic link", ...
}

func (e *IrregularError) Error() string {
	return fmt.Sprintf("%s: %s, not a regular file: refused", e.Path, e.Kind)
}

// TooLargeError is a record larger than the limit its reader sets.
type TooLargeError struct {
	Path  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s: larger than %s, too large for this record: refused", e.Path, sizeText(e.Limit))
}

func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Open opens path for reading when it is a regular file, and refuses
// (IrregularError) anything else, a symbolic link included. The open
// itself never blocks: a named pipe with no writer would hold open(2),
// deaf to signals the Go runtime turns into a cancelled context, for as
// long as no one writes to it. Journals and the queue, which grow as long
// as the team works, are opened here and read as their readers see fit.
func Open(path string) (*os.File, error) {
	fd, _, err := openRegular(path, syscall.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// OpenAppend opens path to append to it, created with perm when missing,
// with the checks of Open: a journal is appended to only when it is a
// regular file, not through a link, and the open never blocks (a named
// pipe would swallow the lines, or hold the writer). The file is open for
// reading too: an appender looks at the last byte.
func OpenAppend(path string, perm os.FileMode) (*os.File, error) {
	fd, _, err := openRegular(path, syscall.O_RDWR|syscall.O_APPEND|syscall.O_CREAT, uint32(perm.Perm()))
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// ReadFile reads the regular file at path (see Open), refusing one larger
// than limit bytes (TooLargeError); limit <= 0 reads it whole.
func ReadFile(path string, limit int64) ([]byte, error) {
	var buf []byte
	return ReadInto(&buf, path, limit)
}

// ReadInto is ReadFile into *buf, grown as needed and reused from call to
// call, in as few system calls as it takes: a watch pass reads the record
// of every worker of a large team. The result aliases *buf.
func ReadInto(buf *[]byte, path string, limit int64) ([]byte, error) {
	fd, size, err := openRegular(path, syscall.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	if limit > 0 && size > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	// Room for the whole file and one byte more, so that its end is a
	// short read.
	if need := size + 1; int64(len(*buf)) < need {
		*buf = make([]byte, max(need, 512))
	}
	n := 0
	for {
		if limit > 0 && int64(n) > limit {
			return nil, &TooLargeError{Path: path, Limit: limit}
		}
		if n == len(*buf) {
			*buf = append(*buf, make([]byte, len(*buf))...)
		}
		m, err := syscall.Read(fd, (*buf)[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m <= 0 {
			return (*buf)[:n], nil
		}
		n += m
		// A short read of a regular file is its end (a file appended to
		// meanwhile is read as it was): one read(2) for a small record.
		if n < len(*buf) && (limit <= 0 || int64(n) <= limit) {
			return (*buf)[:n], nil
		}
	}
}

// openRegular opens path with flags, without following a symbolic link and
// without blocking, and returns its descriptor, in blocking mode again,
// and its size, once fstat shows a regular file.
func openRegular(path string, flags int, perm uint32) (int, int64, error) {
	flags |= syscall.O_CLOEXEC | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	fd, err := syscall.Open(path, flags, perm)
	for err == syscall.EINTR {
		fd, err = syscall.Open(path, flags, perm)
	}
	if err != nil {
		// ELOOP: a symbolic link (O_NOFOLLOW); ENXIO: a socket, or a
		// device with no driver. Say which.
		if err == syscall.ELOOP || err == syscall.ENXIO {
			if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
				return -1, 0, &IrregularError{Path: path, Kind: Kind(fi.Mode())}
			}
		}
		return -1, 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return -1, 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return -1, 0, &IrregularError{Path: path, Kind: Kind(modeType(st.Mode))}
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return -1, 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, st.Size, nil
}

// modeType is the fs.FileMode type bits of a stat(2) mode.
func modeType(m uint32) fs.FileMode {
	switch m & syscall.S_IFMT {
	case syscall.S_IFIFO:
		return fs.ModeNamedPipe
	case syscall.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		return fs.ModeDevice
	case syscall.S_IFSOCK:
		return fs.ModeSocket
	case syscall.S_IFDIR:
		return fs.ModeDir
	case syscall.S_IFLNK:
		return fs.ModeSymlink
	}
	return fs.ModeIrregular
}

// Kind says what kind of file a mode that is not a regular file's names,
// for a message: "a named pipe (FIFO)", "a directory", ...
func Kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "of an unknown type"
}
