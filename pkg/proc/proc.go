// Package proc identifies processes safely: a pid together with its start
// time names one process, so a pid reused by the system is never mistaken
// for the worker that had it (DESIGN.md §4, pg-monitor).
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

// StartTime returns the start time of pid as recorded by the kernel: the
// 22nd field of /proc/<pid>/stat, in clock ticks since boot, as a decimal
// string. It is what worker records keep in pid_start.
func StartTime(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return "", ErrGone
	}
	if err != nil {
		return "", fmt.Errorf("read process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("read process %d: malformed stat", pid)
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return "", fmt.Errorf("read process %d: malformed stat", pid)
	}
	return string(fields[19]), nil
}

// State returns the one-letter state of pid (R, S, D, Z, T, ...).
func State(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return "", ErrGone
	}
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(b, ')')
	fields := bytes.Fields(b[i+1:])
	if i < 0 || len(fields) < 1 {
		return "", fmt.Errorf("read process %d: malformed stat", pid)
	}
	return string(fields[0]), nil
}

// Matches reports whether pid is alive (not a zombie) and still the process
// that started at start. It reads /proc/<pid>/stat once.
func Matches(pid int, start string) bool {
	if pid <= 0 || start == "" {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 20 {
		return false
	}
	st := string(fields[0])
	return string(fields[19]) == start && st != "Z" && st != "X"
}

// Self returns the pid and start time of the calling process.
func Self() (int, string, error) {
	pid := os.Getpid()
	s, err := StartTime(pid)
	return pid, s, err
}

// SignalGroup sends sig to the process group led by pid, but only while
// pid is still the process that started at start. It reports whether the
// signal was sent.
func SignalGroup(pid int, start string, sig syscall.Signal) (bool, error) {
	if !Matches(pid, start) {
		return false, nil
	}
	if err := syscall.Kill(-pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			// Not a group leader: signal the process alone.
			if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				return false, err
			}
			return true, nil
		}
		return false, err
	}
	return true, nil
}

// Member is one live process of a process group: its pid and start time.
type Member struct {
	PID   int    `json:"pid"`
	Start string `json:"start"`
}

// GroupMembers lists the live (not zombie) processes whose process group is
// pgid, by scanning /proc.
func GroupMembers(pgid int) ([]Member, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Member
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		// fields[0] is field 3 (state), fields[2] field 5 (pgrp),
		// fields[19] field 22 (start time).
		fields := bytes.Fields(b[i+1:])
		if len(fields) < 20 || string(fields[2]) != strconv.Itoa(pgid) {
			continue
		}
		if st := string(fields[0]); st == "Z" || st == "X" {
			continue
		}
		out = append(out, Member{PID: pid, Start: string(fields[19])})
	}
	return out, nil
}

// SignalLeftovers sends sig to process group pgid whose leader has ended,
// but only while one of known (members recorded while the leader lived)
// is still alive in that group. A group id is its leader's pid, and the
// kernel does not reuse a pid while any process still has it as its group
// id: a known member alive in the group proves the group is the same one,
// so the signal cannot reach a group that reused the id. It reports
// whether the signal was sent.
func SignalLeftovers(pgid int, known []Member, sig syscall.Signal) (bool, error) {
	now, err := GroupMembers(pgid)
	if err != nil {
		return false, err
	}
	if !anyKnown(now, known) {
		return false, nil
	}
	if err := syscall.Kill(-pgid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return false, nil
		}
		return false, err
	}
	return true, nil
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
