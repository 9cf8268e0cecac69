package teamdir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// WriteWorker atomically replaces worker-<n>.json with rec.
func (d Dir) WriteWorker(rec *protocol.Worker) error {
	if err := ValidName("worker", rec.Worker); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(d.Worker(rec.Worker), append(b, '\n'), FileMode)
}

// ReadWorker reads worker-<n>.json. A record that names another worker
// than n is unreadable (see CheckWorkerKey).
func (d Dir) ReadWorker(n string) (*protocol.Worker, error) {
	path := d.Worker(n)
	b, err := atomicfile.ReadFile(path, atomicfile.RecordLimit)
	if err != nil {
		return nil, err
	}
	return decodeWorker(path, n, b)
}

// decodeWorker decodes the record stored under the worker name key, at
// path (for messages).
func decodeWorker(path, key string, b []byte) (*protocol.Worker, error) {
	w := new(protocol.Worker)
	if err := json.Unmarshal(b, w); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := CheckWorkerKey(key, w); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// CheckWorkerKey checks that a worker record stored under key (the n of
// worker-<n>.json, a row's key in PostgreSQL) names that worker, and that
// key is a valid worker name. A record that fails is unreadable: listed as
// an error, never acted on. Every tool acts on a record by the name inside
// it (pg-monitor releases the tasks that name claims), so a stale copy
// under another key (worker-1-old.json holding "worker":"1") would make
// the monitor release the tasks of the live worker 1.
func CheckWorkerKey(key string, rec *protocol.Worker) error {
	if err := ValidName("worker", key); err != nil {
		return err
	}
	if rec.Worker != key {
		return fmt.Errorf("the record names worker %q, not %q, under which it is stored: not read (a copy or a hand edit?)", rec.Worker, key)
	}
	return nil
}

// Workers reads every worker-<n>.json of the team, sorted by worker name
// (numerically when the names are numbers). Unreadable records (not JSON,
// not naming worker n, n not a valid name: CheckWorkerKey; not a regular
// file, larger than atomicfile.RecordLimit) are
// returned as errors alongside the good ones; a record replaced between
// the listing and its read is skipped. A watch pass reads hundreds of
// records, so they are read into one reused buffer.
func (d Dir) Workers() ([]*protocol.Worker, []error) {
	ents, err := os.ReadDir(d.Path())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{err}
	}
	var out []*protocol.Worker
	var errs []error
	var buf []byte
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "worker-") || !strings.HasSuffix(name, ".json") || strings.Contains(name, ".tmp-") || e.IsDir() {
			continue
		}
		key := strings.TrimSuffix(strings.TrimPrefix(name, "worker-"), ".json")
		path := filepath.Join(d.Path(), name)
		if err := ValidName("worker", key); err != nil {
			// Not a name any tool writes; quoted, as it may hold anything.
			errs = append(errs, fmt.Errorf("%s: %w", filepath.Join(d.Path(), strconv.Quote(name)), err))
			continue
		}
		b, err := atomicfile.ReadInto(&buf, path, atomicfile.RecordLimit)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // replaced between the listing and the read
				errs = append(errs, err)
			}
			continue
		}
		w, err := decodeWorker(path, key, b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return WorkerLess(out[i].Worker, out[j].Worker) })
	return out, errs
}

// WorkerLess orders worker names numerically when both are numbers.
func WorkerLess(a, b string) bool {
	if len(a) != len(b) && isDigits(a) && isDigits(b) {
		return len(a) < len(b)
	}
	return a < b
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// Velocity is worker-<n>.velocity: a number the worker re-reads every
// iteration (1 = normal, 0 = paused); pg-dash and people write it.
func (d Dir) Velocity(n string) string { return filepath.Join(d.Path(), "worker-"+n+".velocity") }
