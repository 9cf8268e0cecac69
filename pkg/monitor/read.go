package monitor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// A watch pass reads every worker record and every recorded process's
// /proc/<pid>/stat; with hundreds of workers the syscalls dominate, so both
// are read with a reused buffer in as few calls as possible
// (open, read, close).

// reader reads small files into a reused buffer.
type reader struct{ buf []byte }

func (r *reader) read(path string) ([]byte, error) {
	if r.buf == nil {
		r.buf = make([]byte, 16*1024)
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	for err == syscall.EINTR {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	n := 0
	for {
		if n == len(r.buf) {
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		m, err := syscall.Read(fd, r.buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m <= 0 {
			return r.buf[:n], nil
		}
		n += m
		// A short read of a regular file or a /proc seq file is its end:
		// the records are replaced atomically, never written in place.
		if n < len(r.buf) {
			return r.buf[:n], nil
		}
	}
}

// matches is proc.Matches over the reused buffer.
func (r *reader) matches(pid int, start string) bool {
	if pid <= 0 || start == "" {
		return false
	}
	b, err := r.read("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	st, err := proc.ParseStat(b)
	return err == nil && st.Start == start && st.Alive()
}

// workers is teamdir.Dir.Workers over the reused buffer: every
// worker-<n>.json, sorted by worker name; unreadable records come back as
// errors.
func (r *reader) workers(d teamdir.Dir) ([]*protocol.Worker, []error) {
	ents, err := os.ReadDir(d.Path())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{err}
	}
	var out []*protocol.Worker
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "worker-") || !strings.HasSuffix(name, ".json") || strings.Contains(name, ".tmp-") || e.IsDir() {
			continue
		}
		path := filepath.Join(d.Path(), name)
		b, err := r.read(path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) { // replaced between the listing and the read
				errs = append(errs, err)
			}
			continue
		}
		w := new(protocol.Worker)
		if err := json.Unmarshal(b, w); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return teamdir.WorkerLess(out[i].Worker, out[j].Worker) })
	return out, errs
}
