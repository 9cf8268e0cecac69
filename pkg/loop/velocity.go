package loop

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// velocityFile is the velocity file, read again only when it changed: a
// step looks at it with one stat, where reading it took nine system calls
// (issue 21). A file whose change time is within racy of when it was
// last read is read again at every step, because a file's times come
// from the kernel's clock tick: a second write of the same size within
// the tick of a read would show no change. On a file system that keeps
// whole seconds (a change time without nanoseconds: ext3, FAT, some NFS
// servers) the window is two seconds more. (A file on a server whose
// clock is behind this host's by more than that loses the guard.)
type velocityFile struct {
	path  string
	racy  time.Duration
	reads int                               // reads of the file, for the tests
	stat  func(string) (os.FileInfo, error) // os.Stat but in the tests

	seen   fileStamp // of the file last read; zero: read it
	readAt time.Time
	v      float64
	set    bool
	err    error
}

const racyVelocity = 100 * time.Millisecond

func newVelocityFile(path string) *velocityFile {
	return &velocityFile{path: path, racy: racyVelocity, stat: os.Stat}
}

// fileStamp is what changes when a file is written or replaced.
type fileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// read returns the velocity the file holds; a missing or empty file is
// "not set".
func (f *velocityFile) read() (v float64, set bool, err error) {
	fi, err := f.stat(f.path)
	if err != nil {
		f.seen = fileStamp{}
		if errors.Is(err, os.ErrNotExist) {
			return 0, false, nil
		}
		return 0, false, err
	}
	now := time.Now()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok { // not a Unix file system: read it every time
		return ReadVelocity(f.path)
	}
	stamp := fileStamp{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
	racy := f.racy
	if st.Ctim.Nsec == 0 {
		racy += 2 * time.Second
	}
	if stamp == f.seen && f.readAt.Sub(time.Unix(st.Ctim.Unix())) > racy {
		return f.v, f.set, f.err
	}
	f.reads++
	f.v, f.set, f.err = ReadVelocity(f.path)
	f.seen, f.readAt = stamp, now
	return f.v, f.set, f.err
}
