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
