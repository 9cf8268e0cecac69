package remote

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store/dial"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// An error keeps its message, what it wraps, whether it is bad input and
// so its exit code across the wire.
func TestErrorsCrossTheWire(t *testing.T) {
	cases := []error{
		fmt.Errorf("task t-1: %w", queue.ErrNotFound),
		fmt.Errorf("task t-1: token 3 is not the claim's (5): %w", queue.ErrLeaseLost),
		fmt.Errorf("task t-1 is done: %w", queue.ErrFinished),
		queue.ErrNothing,
		&queue.InputError{Index: 2, Msg: "task 3: title is empty"},
		&queue.InputError{Index: -1, Msg: "unknown status \"x\""},
		&queue.FileError{Err: errors.New("task-queue.json: version 9")},
		fmt.Errorf("worker 1 of team t: %w", fs.ErrNotExist),
		fmt.Errorf("worker 1: %w", teamdir.ErrNoApproval),
		&dial.InputError{Msg: "invalid store"},
		context.Canceled,
		fmt.Errorf("wait: %w", context.DeadlineExceeded),
		errors.New("connection refused"),
	}
	sentinels := []error{queue.ErrNotFound, queue.ErrLeaseLost, queue.ErrFinished, queue.ErrNothing, fs.ErrNotExist, teamdir.ErrNoApproval, context.Canceled, context.DeadlineExceeded}
	for _, want := range cases {
		got := decodeError(encodeError(want))
		if got.Error() != want.Error() {
			t.Errorf("message %q, want %q", got, want)
		}
		if cli.ExitCode(got) != cli.ExitCode(want) || cli.Kind(got) != cli.Kind(want) {
			t.Errorf("%q: exit %d kind %q, want %d %q", want, cli.ExitCode(got), cli.Kind(got), cli.ExitCode(want), cli.Kind(want))
		}
		for _, s := range sentinels {
			if errors.Is(got, s) != errors.Is(want, s) {
				t.Errorf("%q: errors.Is(%v) = %v", want, s, errors.Is(got, s))
			}
		}
		var wi, gi *queue.InputError
		if errors.As(want, &wi) != errors.As(got, &gi) || (wi != nil && *wi != *gi) {
			t.Errorf("%q: input error %+v, want %+v", want, gi, wi)
		}
	}
}
