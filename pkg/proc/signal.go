package proc

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Target names one process as its starter recorded it. Start is required;
// the other fields, when set, must match too.
type Target struct {
	PID   int
	Start string // pid_start: the start time in clock ticks since boot
	PPID  int    // the recorded parent, 0: not checked
	PGID  int    // the recorded process group, 0: not checked
	SID   int    // the recorded session, 0: not checked
	// Terminal: the process leads a terminal session on purpose (a
	// pg-pty program). Without it, a session leader with a controlling
	// terminal (a login shell) is refused: no worker is one.
	Terminal bool
}

func (t Target) matches(s Stat) bool {
	return s.Alive() && s.Start == t.Start &&
		(t.PPID == 0 || s.PPID == t.PPID) &&
		(t.PGID == 0 || s.PGID == t.PGID) &&
		(t.SID == 0 || s.SID == t.SID)
}

// Sender delivers a signal once every check has passed. Tests record
// what would be sent by giving a Signaler their own.
type Sender interface {
	// Process signals the one process open as pidfd fd (pid is its pid).
	Process(fd, pid int, sig syscall.Signal) error
	// Group signals every process of group pgid.
	Group(pgid int, sig syscall.Signal) error
}

// System is the Sender of the real kernel: pidfd_send_signal(2) and
// kill(2) of a negative pid.
type System struct{}

// Process implements Sender.
func (System) Process(fd, pid int, sig syscall.Signal) error {
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}

// Group implements Sender.
func (System) Group(pgid int, sig syscall.Signal) error {
	if pgid <= 1 { // the last line of defence: kill(-1) is everything
		return refuse("process group %d", pgid)
	}
	return unix.Kill(-pgid, sig)
}

// Signaler signals processes named by records (worker-<n>.json, a pty
// session.json) after checking that they are still what was recorded.
// Its zero value uses the System sender.
type Signaler struct{ Sender Sender }

// Default is the Signaler of the real kernel.
var Default = &Signaler{}

func (s *Signaler) sender() Sender {
	if s == nil || s.Sender == nil {
		return System{}
	}
	return s.Sender
}

// open checks t and opens a pidfd on it. The pidfd is opened before the
// stat is read: when the stat matches the record, the pidfd names the
// recorded process (a pid is reused only after its process is reaped, and
// a new one has a later start time), and a signal through it can never
// reach a process that got the pid since. ok is false when t has ended or
// is not the recorded process.
func (s *Signaler) open(l lineage, t Target) (fd int, st Stat, ok bool, err error) {
	if err := l.guard(t.PID); err != nil {
		return -1, st, false, err
	}
	if t.Start == "" {
		return -1, st, false, refuse("pid %d has no recorded start time", t.PID)
	}
	fd, err = unix.PidfdOpen(t.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return -1, st, false, nil
	}
	if err != nil {
		return -1, st, false, fmt.Errorf("pidfd_open %d: %w", t.PID, err)
	}
	st, err = ReadStat(t.PID)
	if err != nil || !t.matches(st) {
		unix.Close(fd)
		if errors.Is(err, ErrGone) {
			err = nil
		}
		return -1, st, false, err
	}
	if st.Kernel() {
		unix.Close(fd)
		return -1, st, false, refuse("pid %d (%s) is a kernel thread", t.PID, st.Comm)
	}
	if !t.Terminal && LoginShell(st) {
		unix.Close(fd)
		return -1, st, false, refuse("pid %d (%s) leads a terminal session (a login shell)", t.PID, st.Comm)
	}
	return fd, st, true, nil
}

// Signal sends sig to the process t alone, only while it is the recorded
// process. It reports whether the signal was sent; a refused target is an
// error wrapping ErrRefused.
func (s *Signaler) Signal(t Target, sig syscall.Signal) (bool, error) {
	fd, _, ok, err := s.open(ancestry(), t)
	if !ok {
		return false, err
	}
	defer unix.Close(fd)
	return sent(s.sender().Process(fd, t.PID, sig))
}

// SignalGroup sends sig to the process group led by t, only while t is
// the recorded process and alive: a group id is its leader's pid, and
// while the leader is unreaped (checked through its pidfd right before)
// the id cannot name another group. A target that leads no group is
// signalled alone. A group holding the caller or an ancestor is refused.
func (s *Signaler) SignalGroup(t Target, sig syscall.Signal) (bool, error) {
	l := ancestry()
	fd, st, ok, err := s.open(l, t)
	if !ok {
		return false, err
	}
	defer unix.Close(fd)
	if st.PGID != t.PID {
		return sent(s.sender().Process(fd, t.PID, sig))
	}
	if err := l.guardGroup(st.PGID); err != nil {
		return false, err
	}
	// Signal 0 through the pidfd fails once the leader is reaped.
	if err := unix.PidfdSendSignal(fd, 0, nil, 0); err != nil {
		return sent(err)
	}
	return sent(s.sender().Group(st.PGID, sig))
}

// SignalLeftovers sends sig to process group pgid whose leader has ended,
// but only while one of known (members recorded while the leader lived)
// is still alive in that group. A group id is its leader's pid, and the
// kernel does not reuse a pid while any process still has it as its group
// id: a known member alive in the group proves the group is the same one,
// so the signal cannot reach a group that reused the id. Groups 1 and
// below, and those of the caller and its ancestors, are refused. It
// reports whether the signal was sent.
func (s *Signaler) SignalLeftovers(pgid int, known []Member, sig syscall.Signal) (bool, error) {
	if err := ancestry().guardGroup(pgid); err != nil {
		return false, err
	}
	now, err := GroupMembers(pgid)
	if err != nil {
		return false, err
	}
	if !anyKnown(now, known) {
		return false, nil
	}
	return sent(s.sender().Group(pgid, sig))
}

// GroupOf lists the live members of the process group led by t, only
// while t is the recorded process before and after the listing: then the
// group is t's, and the list can later prove its identity to
// SignalLeftovers. It is nil otherwise.
func GroupOf(t Target) []Member {
	if s, err := ReadStat(t.PID); err != nil || !t.matches(s) || s.PGID != t.PID {
		return nil
	}
	ms, err := GroupMembers(t.PID)
	if s, serr := ReadStat(t.PID); err != nil || serr != nil || !t.matches(s) {
		return nil
	}
	return ms
}

func sent(err error) (bool, error) {
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	return err == nil, err
}
