package pty

import (
	"errors"
	"os"
	"sync/atomic"
	"time"
)

// pump copies a terminal master's output to sink until the terminal is
// closed by every process holding it, or until drain gives up on it.
type pump struct {
	f        *os.File
	sink     func([]byte)
	done     chan struct{}
	lastData atomic.Int64 // unix nanoseconds of the last chunk read
	waiting  atomic.Bool  // blocked in Read with nothing buffered
	err      error
}

func newPump(f *os.File, bufSize int, sink func([]byte)) *pump {
	p := &pump{f: f, sink: sink, done: make(chan struct{})}
	p.lastData.Store(time.Now().UnixNano())
	go p.loop(bufSize)
	return p
}

func (p *pump) loop(bufSize int) {
	defer close(p.done)
	buf := make([]byte, bufSize)
	for {
		p.waiting.Store(true)
		n, err := p.f.Read(buf)
		p.waiting.Store(false)
		if n > 0 {
			p.lastData.Store(time.Now().UnixNano())
			p.sink(buf[:n])
		}
		if err != nil {
			// EIO: every slave side is closed. A deadline: drain gave up.
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				p.err = err
			}
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
func (p *pump) drain(exitAt time.Time) {
	deadline := exitAt.Add(drainMax)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return
		case now := <-tick.C:
			last := time.Unix(0, p.lastData.Load())
			if last.Before(exitAt) {
				last = exitAt
			}
			if now.After(deadline) || (p.waiting.Load() && now.Sub(last) >= drainQuiet) {
				p.stop()
				return
			}
		}
	}
}

// stop interrupts the pump and waits for it.
func (p *pump) stop() {
	p.f.SetReadDeadline(time.Now())
	<-p.done
}
