// Package proc identifies and signals processes safely: a pid together
// with its start time names one process, so a pid reused by the system is
// never mistaken for the worker that had it (DESIGN.md §4, pg-monitor).
//
// Every signal of the toolkit goes through this package: [Signaler] for
// processes named by a record (a worker file, a pty session file), [Child]
// for process groups this process started itself. Both refuse what no
// tool of ours ever starts: pid 1 and below, the caller and its ancestors.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// ErrGone means no process has the pid.
var ErrGone = errors.New("no such process")

// Stat is what /proc/<pid>/stat says of one process (proc(5)).
type Stat struct {
	PID   int
	Comm  string // the command name, without its parentheses
	State byte   // R, S, D, Z, T, X, ...
	PPID  int
	PGID  int
	SID   int
	TTY   int    // the controlling terminal (tty_nr), 0 for none
	Flags uint64 // the kernel's PF_* flags (field 9)
	Start string // field 22: start time in clock ticks since boot, as recorded in pid_start
}

// pfKthread is PF_KTHREAD of the kernel's process flags.
const pfKthread = 0x00200000

// Kernel reports whether the process is a kernel thread.
func (s *Stat) Kernel() bool { return s.Flags&pfKthread != 0 }

// Alive reports whether the process runs (is neither a zombie nor dead).
func (s *Stat) Alive() bool { return s.State != 'Z' && s.State != 'X' }

// ParseStat parses the content of /proc/<pid>/stat. The command name
// (field 2) is in parentheses and may hold spaces and parentheses itself:
// the fields after it start after the last ')'.
func ParseStat(b []byte) (Stat, error) {
	var s Stat
	open := bytes.IndexByte(b, '(')
	close := bytes.LastIndexByte(b, ')')
	if open < 1 || close < open {
		return s, errors.New("malformed stat")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return s, errors.New("malformed stat: pid")
	}
	f := bytes.Fields(b[close+1:])
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return s, errors.New("malformed stat")
	}
	s.PID, s.Comm, s.State, s.Start = pid, string(b[open+1:close]), f[0][0], string(f[19])
	for _, x := range []struct {
		dst *int
		b   []byte
	}{{&s.PPID, f[1]}, {&s.PGID, f[2]}, {&s.SID, f[3]}, {&s.TTY, f[4]}} {
		if *x.dst, err = strconv.Atoi(string(x.b)); err != nil {
			return s, errors.New("malformed stat")
		}
	}
	if s.Flags, err = strconv.ParseUint(string(f[6]), 10, 64); err != nil {
		return s, errors.New("malformed stat: flags")
	}
	if _, err := strconv.ParseUint(s.Start, 10, 64); err != nil {
		return s, errors.New("malformed stat: start time")
	}
	return s, nil
}

// ReadStat reads and parses /proc/<pid>/stat. A pid with no process gives
// ErrGone.
func ReadStat(pid int) (Stat, error) {
	if pid <= 0 {
		return Stat{}, ErrGone
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return Stat{}, ErrGone
	}
	if err != nil {
		return Stat{}, fmt.Errorf("read process %d: %w", pid, err)
	}
	s, err := ParseStat(b)
	if err != nil {
		return s, fmt.Errorf("read process %d: %w", pid, err)
	}
	return s, nil
}

// StartTime returns the start time of pid as recorded by the kernel: the
// 22nd field of /proc/<pid>/stat, in clock ticks since boot, as a decimal
// string. It is what worker records keep in pid_start.
func StartTime(pid int) (string, error) {
	s, err := ReadStat(pid)
	return s.Start, err
}

// State returns the one-letter state of pid (R, S, D, Z, T, ...).
func State(pid int) (string, error) {
	s, err := ReadStat(pid)
	if err != nil {
		return "", err
	}
	return string(s.State), nil
}

// Matches reports whether pid is alive (not a zombie) and still the process
// that started at start. A start that is not as the kernel writes it (see
// ValidStart) matches nothing: callers that act on a process being gone
// check ValidStart first.
func Matches(pid int, start string) bool {
	if pid <= 0 || !ValidStart(start) {
		return false
	}
	s, err := ReadStat(pid)
	return err == nil && s.Start == start && s.Alive()
}

// ValidStart reports whether start is a start time as /proc writes it and
// pid_start keeps it: a decimal number, without sign, spaces or leading
// zeros. A record with another one ("06942482", " 6942482", "x", "") names
// no process that can be checked: its worker's liveness is unknown, never
// "gone", since a malformed or hand-edited record must not release a live
// worker's claim.
func ValidStart(start string) bool {
	if start == "" || len(start) > 20 || (start[0] == '0' && len(start) > 1) {
		return false
	}
	for i := 0; i < len(start); i++ {
		if start[i] < '0' || start[i] > '9' {
			return false
		}
	}
	return true
}

// Self returns the pid and start time of the calling process.
func Self() (int, string, error) {
	pid := os.Getpid()
	s, err := StartTime(pid)
	return pid, s, err
}

// Member is one live process of a process group: its pid and start time.
type Member struct {
	PID   int    `json:"pid"`
	Start string `json:"start"`
}

// Scan calls fn with every live (not zombie) process in /proc.
func Scan(fn func(Stat)) error {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, err := ReadStat(pid)
		if err != nil || !s.Alive() {
			continue // ended meanwhile
		}
		fn(s)
	}
	return nil
}

// GroupMembers lists the live (not zombie) processes whose process group is
// pgid, by scanning /proc.
func GroupMembers(pgid int) ([]Member, error) {
	var out []Member
	err := Scan(func(s Stat) {
		if s.PGID == pgid {
			out = append(out, Member{PID: s.PID, Start: s.Start})
		}
	})
	return out, err
}

// Leftovers reports the members of known still alive in group pgid.
func Leftovers(pgid int, known []Member) []Member {
	now, err := GroupMembers(pgid)
	if err != nil {
		return nil
	}
	var out []Member
	for _, m := range now {
		if anyKnown([]Member{m}, known) {
			out = append(out, m)
		}
	}
	return out
}

func anyKnown(now, known []Member) bool {
	for _, m := range now {
		for _, k := range known {
			if m == k {
				return true
			}
		}
	}
	return false
}
