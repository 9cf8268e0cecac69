package pty

import (
	"os"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pump copies a terminal master's output to sink until the terminal is
// closed by every process holding it, or until drain gives up on it.
//
// It reads with poll(2) and read(2) on the raw descriptor rather than
// through Go's poller: a terminal hands out output in small chunks, and
// parking and waking a goroutine for each one costs more than the copy.
// A pipe wakes the poll when the pump must stop.
type pump struct {
	f        *os.File
	fd       int
	wakeR    *os.File
	wakeW    *os.File
	sink     func([]byte)
	done     chan struct{}
	stopping atomic.Bool
	lastData atomic.Int64 // unix nanoseconds of the last chunk read
	waiting  atomic.Bool  // in poll with nothing buffered
	pts      string       // the slave side's path, to see who holds it
	err      error
}

func newPump(f *os.File, bufSize int, sink func([]byte)) *pump {
	p := &pump{f: f, fd: -1, sink: sink, done: make(chan struct{}), pts: ptsName(f)}
	p.lastData.Store(time.Now().UnixNano())
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { p.fd = int(fd) })
	}
	p.wakeR, p.wakeW, p.err = os.Pipe()
	go p.loop(bufSize)
	return p
}

func (p *pump) loop(bufSize int) {
	defer close(p.done)
	if p.err != nil || p.fd < 0 {
		return
	}
	defer p.wakeR.Close()
	buf := make([]byte, bufSize)
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}, {Fd: int32(p.wakeR.Fd()), Events: unix.POLLIN}}
	for {
		// The descriptor is non-blocking, so reads never block and can
		// skip the scheduler's blocking-syscall bookkeeping. What is
		// already there is gathered into one chunk (a terminal hands it
		// out a few KB at a time), so the sink writes less often.
		n := 0
		var err error
		for n < len(buf) {
			m, rerr := rawRead(p.fd, buf[n:])
			if m <= 0 {
				err = rerr
				break
			}
			n += m
		}
		if n > 0 {
			p.lastData.Store(time.Now().UnixNano())
			p.sink(buf[:n])
			if err == nil || err == unix.EAGAIN {
				continue // look again before sleeping in poll
			}
		}
		if p.stopping.Load() {
			return
		}
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
		default:
			// EIO (or end of file): every slave side is closed.
			if err != unix.EIO {
				p.err = err
			}
			return
		}
		p.waiting.Store(true)
		fds[0].Revents, fds[1].Revents = 0, 0
		_, perr := unix.Poll(fds, -1)
		p.waiting.Store(false)
		if perr != nil && perr != unix.EINTR {
			p.err = perr
			return
		}
		if fds[1].Revents != 0 {
			return
		}
	}
}

// Drain policy after the child exits: output the child wrote before it
// exited may still be in flight inside the kernel's terminal layer, so
// the pump keeps reading until the terminal closes, or until it has been
// idle for drainQuiet (a grandchild holds the terminal open), and never
// for longer than drainMax (a grandchild keeps printing).
const (
	drainQuiet = 150 * time.Millisecond
	drainMax   = 3 * time.Second
)

// drain waits for the output to end after the child exited at exitAt. It
// returns once the pump has stopped.
//
// The quiet cut-off is only for a terminal some other process still holds:
// when nobody does, the end of the output is on its way (a loaded machine
// can delay the kernel's hand-over well past drainQuiet), so the pump
// waits for it, up to drainMax.
func (p *pump) drain(exitAt time.Time) {
	deadline := exitAt.Add(drainMax)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	checked, held := false, true
	for {
		select {
		case <-p.done:
			return
		case now := <-tick.C:
			last := time.Unix(0, p.lastData.Load())
			if last.Before(exitAt) {
				last = exitAt
			}
			quiet := p.waiting.Load() && now.Sub(last) >= drainQuiet
			if quiet && !checked {
				checked = true
				held = p.pts == "" || ptsHeld(p.pts)
			}
			if now.After(deadline) || (quiet && held) {
				p.stop()
				return
			}
		}
	}
}

// ptsName is the path of the terminal's slave side, e.g. /dev/pts/3.
func ptsName(master *os.File) string {
	rc, err := master.SyscallConn()
	if err != nil {
		return ""
	}
	name := ""
	rc.Control(func(fd uintptr) {
		if n, err := unix.IoctlGetUint32(int(fd), unix.TIOCGPTN); err == nil {
			name = "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
		}
	})
	return name
}

// ptsHeld reports whether any process has the terminal open. Processes
// whose descriptors cannot be read (other users') are taken not to.
func ptsHeld(name string) bool {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, pe := range procs {
		if c := pe.Name()[0]; c < '0' || c > '9' {
			continue
		}
		dir := "/proc/" + pe.Name() + "/fd/"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fe := range fds {
			if link, err := os.Readlink(dir + fe.Name()); err == nil && link == name {
				return true
			}
		}
	}
	return false
}

// stop interrupts the pump and waits for it.
func (p *pump) stop() {
	p.stopping.Store(true)
	if p.wakeW != nil {
		p.wakeW.Write([]byte{0})
	}
	<-p.done
	if p.wakeW != nil {
		p.wakeW.Close()
	}
}

func rawRead(fd int, b []byte) (int, error) {
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}
