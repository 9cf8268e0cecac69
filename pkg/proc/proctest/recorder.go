package proctest

import (
	"sync"
	"syscall"

	"github.com/powerglide/powerglide/pkg/proc"
)

// Sent is one signal a Recorder was asked to send: to the process Pid, or
// to the process group Group.
type Sent struct {
	Pid   int
	Group int
	Sig   syscall.Signal
}

// Recorder is a proc.Sender that records every signal it is asked to
// send, and sends it for real only when Forward is set.
type Recorder struct {
	Forward bool
	mu      sync.Mutex
	sent    []Sent
}

// Process implements proc.Sender.
func (r *Recorder) Process(fd, pid int, sig syscall.Signal) error {
	r.add(Sent{Pid: pid, Sig: sig})
	if r.Forward {
		return proc.System{}.Process(fd, pid, sig)
	}
	return nil
}

// Group implements proc.Sender.
func (r *Recorder) Group(pgid int, sig syscall.Signal) error {
	r.add(Sent{Group: pgid, Sig: sig})
	if r.Forward {
		return proc.System{}.Group(pgid, sig)
	}
	return nil
}

func (r *Recorder) add(s Sent) {
	r.mu.Lock()
	r.sent = append(r.sent, s)
	r.mu.Unlock()
}

// Sent returns what was sent so far, and forgets it.
func (r *Recorder) Sent() []Sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sent
	r.sent = nil
	return s
}
