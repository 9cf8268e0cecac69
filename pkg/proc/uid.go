package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// UID returns the real user id of pid (the first field of the Uid line
// of /proc/<pid>/status): the user who started it, whatever it setuid to
// since. A pid with no process gives ErrGone.
func UID(pid int) (int, error) {
	if pid <= 0 {
		return -1, ErrGone
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return -1, ErrGone
	}
	if err != nil {
		return -1, fmt.Errorf("read process %d: %w", pid, err)
	}
	return parseUID(b)
}

func parseUID(status []byte) (int, error) {
	for line := range bytes.SplitSeq(status, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte("Uid:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			break
		}
		uid, err := strconv.Atoi(string(f[0]))
		if err != nil || uid < 0 {
			break
		}
		return uid, nil
	}
	return -1, errors.New("malformed status: no Uid line")
}
