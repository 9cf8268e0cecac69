package remote

import (
	"context"
	"errors"
	"io/fs"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// errConflict is a compare-and-write that found another document than the
// one the client read: nothing was written, and the client reads again.
var errConflict = errors.New("the stored document changed since it was read")

// kinds are the errors whose identity crosses the wire, by name.
var kinds = []struct {
	name string
	err  error
}{
	{"not_found", queue.ErrNotFound},
	{"lease_lost", queue.ErrLeaseLost},
	{"finished", queue.ErrFinished},
	{"nothing", queue.ErrNothing},
	{"no_approval", teamdir.ErrNoApproval},
	{"not_exist", fs.ErrNotExist},
	{"conflict", errConflict},
	{"canceled", context.Canceled},
	{"deadline", context.DeadlineExceeded},
}

type badInput interface{ BadInput() bool }

// encodeError is err as the wire carries it: its message, what it wraps
// and whether it is bad input.
func encodeError(err error) *protocol.StoreAgentError {
	if err == nil {
		return nil
	}
	e := &protocol.StoreAgentError{Message: err.Error()}
	var ie *queue.InputError
	if errors.As(err, &ie) && ie.Error() == err.Error() {
		e.Kind, e.Index, e.BadInput = "input", ie.Index, true
		return e
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			e.Kind = k.name
			break
		}
	}
	var b badInput
	e.BadInput = errors.As(err, &b) && b.BadInput()
	return e
}

// decodeError is the error a wire error stands for: the same message,
// errors.Is true for what it wrapped, BadInput as it was.
func decodeError(e *protocol.StoreAgentError) error {
	if e == nil {
		return nil
	}
	if e.Kind == "input" {
		return &queue.InputError{Index: e.Index, Msg: e.Message}
	}
	out := &Error{Msg: e.Message, Bad: e.BadInput}
	for _, k := range kinds {
		if k.name == e.Kind {
			out.Err = k.err
		}
	}
	return out
}

// Error is a store error that came over the wire.
type Error struct {
	Msg string
	Err error // the sentinel it wrapped, or nil
	Bad bool
}

func (e *Error) Error() string  { return e.Msg }
func (e *Error) Unwrap() error  { return e.Err }
func (e *Error) BadInput() bool { return e.Bad }
