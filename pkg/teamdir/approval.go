package teamdir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// Approval is the file that answers worker n's pending approval
// (worker-<n>.approval): written by pg-loop approve or pg-dash, read and
// removed by the worker.
func (d Dir) Approval(n string) string {
	return filepath.Join(d.Path(), "worker-"+n+".approval")
}

// ErrNoApproval: the worker waits on no approval, or on another call.
var ErrNoApproval = errors.New("no pending approval")

// Waiting checks that worker record w waits on the call a answers; the
// error wraps ErrNoApproval.
func Waiting(a protocol.ApprovalAnswer, w *protocol.Worker) error {
	switch {
	case w.Approval == nil:
		return fmt.Errorf("worker %s: %w", a.Worker, ErrNoApproval)
	case w.Approval.Call != a.Call:
		return fmt.Errorf("worker %s waits on call %s, not %s: %w", a.Worker, w.Approval.Call, a.Call, ErrNoApproval)
	}
	return nil
}

// Answer answers a worker's pending approval of a call, after checking
// its record w shows that call waiting (Waiting). The answer is a file of
// the team directory, which the worker reads.
func (d Dir) Answer(a protocol.ApprovalAnswer, w *protocol.Worker) error {
	if err := ValidName("worker", a.Worker); err != nil {
		return err
	}
	if err := Waiting(a, w); err != nil {
		return err
	}
	a.Type = "approval_answer"
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(d.Approval(a.Worker), append(b, '\n'), FileMode)
}

// TakeAnswer reads the answer to call from worker n's approval file, and
// removes the file once it answers that call. ok is false while there is
// no answer to it.
func (d Dir) TakeAnswer(n, call string) (a protocol.ApprovalAnswer, ok bool, err error) {
	p := d.Approval(n)
	b, err := atomicfile.ReadFile(p, atomicfile.RecordLimit)
	if errors.Is(err, os.ErrNotExist) {
		return a, false, nil
	}
	if err != nil {
		return a, false, err
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, false, fmt.Errorf("%s: %w", p, err)
	}
	if a.Call != call {
		return a, false, nil // an answer to an older call
	}
	_ = os.Remove(p)
	return a, true, nil
}
