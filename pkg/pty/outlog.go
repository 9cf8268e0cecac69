package pty

import (
	"errors"
	"fmt"
	"os"

	"github.com/powerglide/powerglide/pkg/protocol"
	"golang.org/x/sys/unix"
)

// DefaultMaxOutput is the default cap in bytes on a session's output.log.
const DefaultMaxOutput = 64 << 20

// outputLog appends a session's output to output.log and keeps the file
// bounded: once it holds more than max bytes, the oldest output is
// discarded by punching a hole at the start of the file. The file keeps its
// size, so offsets stay what they were (read --since, next_offset); only
// the disk space goes, and the discarded part, which reads as zeros, is
// skipped by read. Where the filesystem cannot punch holes, output past
// the cap is not kept.
//
// Write errors (a full disk, a file size limit) do not stop the session:
// they are counted, and the holder reports them in the session's state.
type outputLog struct {
	f     *os.File
	max   int64 // 0: no cap
	size  int64 // every byte written, kept or discarded: the file's size
	start int64 // the first offset still kept
	full  bool  // capped, and holes cannot be punched: nothing more is kept
	lost  int64 // bytes that could not be written
	err   error // the first write error
}

// slack is how far past the cap the file grows before a hole is punched:
// one fallocate per slack bytes, not one per chunk.
func (l *outputLog) slack() int64 { return max(l.max/8, 64<<10) }

// write appends one chunk with one write (a reader never sees half of it)
// and reports whether what the state says about the log changed.
func (l *outputLog) write(b []byte) (changed bool) {
	if l.full {
		l.lost += int64(len(b))
		return true
	}
	n, err := l.f.Write(b)
	l.size += int64(n)
	if err != nil {
		l.lost += int64(len(b) - n)
		if l.err == nil {
			l.err = err
		}
		return true
	}
	if l.max > 0 && l.size-l.start > l.max+l.slack() {
		return l.discard()
	}
	return false
}

// discard punches out everything before the last max bytes, from a 4 KiB
// boundary (a block every filesystem frees whole).
func (l *outputLog) discard() bool {
	to := (l.size - l.max) &^ 4095
	if to <= l.start {
		return false
	}
	if err := unix.Fallocate(int(l.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, l.start, to-l.start); err != nil {
		l.full = true
		if l.err == nil {
			l.err = fmt.Errorf("%s reached its cap of %d bytes and this filesystem cannot discard old output (%v): later output is not kept", OutputFile, l.max, err)
		}
		return true
	}
	l.start = to
	return true
}

// report copies what a session's state says about the log into st.
func (l *outputLog) report(st *protocol.PtySession) {
	st.OutputStart, st.OutputLost = l.start, l.lost
	if l.err != nil {
		st.OutputError = l.err.Error()
		var pe *os.PathError
		if errors.As(l.err, &pe) {
			st.OutputError = fmt.Sprintf("write %s: %v", OutputFile, pe.Err)
		}
	}
}

// dataFrom is the first offset at or after off that holds data, not a hole
// the cap punched (off itself where the filesystem does not say).
func dataFrom(f *os.File, off int64) int64 {
	rc, err := f.SyscallConn()
	if err != nil {
		return off
	}
	at := off
	rc.Control(func(fd uintptr) {
		if n, err := unix.Seek(int(fd), off, unix.SEEK_DATA); err == nil && n > off {
			at = n
		}
	})
	return at
}
