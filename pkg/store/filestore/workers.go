package filestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/gofrs/flock"
	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// Workers are the worker-<n>.json records of a team directory.
type Workers struct{ dir teamdir.Dir }

var _ store.Workers = (*Workers)(nil)

// Read reads worker-<n>.json.
func (w *Workers) Read(_ context.Context, worker string) (*protocol.Worker, error) {
	if err := teamdir.ValidName("worker", worker); err != nil {
		return nil, &inputError{err}
	}
	return w.dir.ReadWorker(worker)
}

// Update reads, changes and replaces worker-<n>.json while holding
// worker-<n>.json.lock, the lock every read-modify-write of the record
// takes (pg-monitor beat, the seed pg-monitor run writes). An unreadable
// record is handed to fn as nil: a heartbeat must go through.
func (w *Workers) Update(_ context.Context, worker string, fn func(old *protocol.Worker) (*protocol.Worker, error)) (*protocol.Worker, error) {
	if err := teamdir.ValidName("worker", worker); err != nil {
		return nil, &inputError{err}
	}
	if err := w.dir.Ensure(); err != nil {
		return nil, err
	}
	lk := flock.New(w.dir.Worker(worker) + ".lock")
	if err := lk.Lock(); err != nil {
		return nil, fmt.Errorf("lock worker %s: %w", worker, err)
	}
	defer lk.Unlock()
	old, err := w.dir.ReadWorker(worker)
	if err != nil {
		old = nil
	}
	rec, err := fn(old)
	if err != nil || rec == nil {
		return rec, err
	}
	if rec.Worker != worker {
		return nil, badInput("worker record of %q written as %q", worker, rec.Worker)
	}
	if err := w.dir.WriteWorker(rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// Write replaces worker-<n>.json atomically.
func (w *Workers) Write(_ context.Context, rec *protocol.Worker) error {
	if err := teamdir.ValidName("worker", rec.Worker); err != nil {
		return &inputError{err}
	}
	if err := w.dir.Ensure(); err != nil {
		return err
	}
	return w.dir.WriteWorker(rec)
}

// List reads every worker-<n>.json.
func (w *Workers) List(context.Context) ([]*protocol.Worker, []error) { return w.dir.Workers() }

// Velocity reads worker-<n>.velocity: 1 when it is missing or empty.
func (w *Workers) Velocity(_ context.Context, worker string) (float64, error) {
	if err := teamdir.ValidName("worker", worker); err != nil {
		return 0, &inputError{err}
	}
	path := w.dir.Velocity(worker)
	b, err := atomicfile.ReadFile(path, atomicfile.RecordLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	v, set, err := teamdir.ParseVelocity(b)
	var ve *teamdir.VelocityError
	if errors.As(err, &ve) {
		return 0, fmt.Errorf("%s: velocity %q is not a non-negative number", path, ve.Text)
	}
	if err != nil {
		return 0, err
	}
	if !set {
		return 1, nil
	}
	return v, nil
}

// SetVelocity replaces worker-<n>.velocity.
func (w *Workers) SetVelocity(_ context.Context, worker string, v float64) error {
	if err := teamdir.ValidName("worker", worker); err != nil {
		return &inputError{err}
	}
	if err := teamdir.CheckVelocity(v); err != nil {
		return &inputError{err}
	}
	if err := w.dir.Ensure(); err != nil {
		return err
	}
	return atomicfile.WriteFile(w.dir.Velocity(worker), []byte(teamdir.FormatVelocity(v)), teamdir.FileMode)
}

// Answer writes worker-<n>.approval once worker-<n>.json shows the call
// waiting.
func (w *Workers) Answer(ctx context.Context, a protocol.ApprovalAnswer) error {
	rec, err := w.Read(ctx, a.Worker)
	if err != nil {
		return err
	}
	return w.dir.Answer(a, rec)
}

// TakeAnswer reads worker-<n>.approval and removes it once it answers call.
func (w *Workers) TakeAnswer(_ context.Context, worker, call string) (protocol.ApprovalAnswer, bool, error) {
	if err := teamdir.ValidName("worker", worker); err != nil {
		return protocol.ApprovalAnswer{}, false, &inputError{err}
	}
	return w.dir.TakeAnswer(worker, call)
}
