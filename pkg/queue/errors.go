package queue

import (
	"errors"
	"fmt"
)

// Sentinel errors; test with errors.Is. The errors returned wrap them with
// the task id and details.
var (
	// ErrNotFound: no live or archived task has the id.
	ErrNotFound = errors.New("task not found")
	// ErrLeaseLost: the fencing token is not the task's current claim (the
	// lease expired and another worker took the task, or the task was
	// released, cancelled or finished with another token). Nothing changed.
	ErrLeaseLost = errors.New("lease lost")
	// ErrNothing: no task is claimable.
	ErrNothing = errors.New("no claimable task")
	// ErrFinished: the task already ended (done, failed or cancelled) and
	// the operation needs a live one.
	ErrFinished = errors.New("task already finished")
)

// InputError is bad input to Add (or another call): nothing was changed.
// Index is the position of the offending task in the Add batch, or -1.
type InputError struct {
	Index int
	Msg   string
}

func (e *InputError) Error() string { return e.Msg }

// BadInput marks the error as bad input (exit 2 in the CLI).
func (e *InputError) BadInput() bool { return true }

func inputErr(i int, format string, args ...any) error {
	return &InputError{Index: i, Msg: fmt.Sprintf(format, args...)}
}

func notFound(id string) error { return fmt.Errorf("task %s: %w", id, ErrNotFound) }

// FileError is a task-queue.json the queue cannot read: not JSON, not the
// shape of a queue, or written by a newer version of pg-queue. It counts as
// bad input (exit 2 in the CLI): the file is refused as it is, and nothing
// is changed.
type FileError struct{ Err error }

func (e *FileError) Error() string { return e.Err.Error() }

func (e *FileError) Unwrap() error { return e.Err }

// BadInput marks the error as bad input.
func (e *FileError) BadInput() bool { return true }

func fileErr(format string, args ...any) error {
	return &FileError{Err: fmt.Errorf(format, args...)}
}
