package queue

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// The rules below are the queue's semantics apart from where tasks are
// kept: another team store (pkg/store/pgstore) calls them so that both
// stores check the same things and say the same words.

// Prepare checks task i of an Add batch and resets its state fields (see
// Add).
func Prepare(i int, t protocol.Task) (protocol.Task, error) { return prepare(i, t) }

// FindCycle reports a dependency cycle among a batch of new tasks; batch
// maps each id to its index.
func FindCycle(in []protocol.Task, batch map[string]int) error { return findCycle(in, batch) }

// CheckLease gives DefaultLease for lease ≤ 0 and refuses one past MaxLease.
func CheckLease(lease time.Duration) (time.Duration, error) { return checkLease(lease) }

// CheckResult refuses a result Complete cannot store: not JSON, or nested
// deeper than jq reads.
func CheckResult(result json.RawMessage) error {
	if len(result) > 0 && !json.Valid(result) {
		return &InputError{Index: -1, Msg: "result is not valid JSON"}
	}
	if d := jsonDepth(result); d > maxValueDepth {
		return &InputError{Index: -1, Msg: fmt.Sprintf("result is nested %d levels deep, at most %d: task-queue.json must stay within %d levels for jq", d, maxValueDepth, MaxDepth)}
	}
	return nil
}

// CompactResult is a result as stored: compact JSON, nil for none.
func CompactResult(result json.RawMessage) json.RawMessage { return compact(result) }

// CheckStatuses refuses a List filter naming an unknown status.
func CheckStatuses(statuses []string) error {
	for _, st := range statuses {
		if _, ok := statusCode(st); !ok && st != "blocked" {
			return &InputError{Index: -1, Msg: fmt.Sprintf("unknown status %q (pending, claimed, done, failed, cancelled, blocked)", st)}
		}
	}
	return nil
}

// DecodeTask decodes a stored task, keeping the fields this version does
// not know in Extra, with empty lists instead of null.
func DecodeTask(js []byte, t *protocol.Task) error {
	if err := decodeTask(js, t); err != nil {
		return err
	}
	normalize(t)
	return nil
}

// NotFound is ErrNotFound for a task id.
func NotFound(id string) error { return notFound(id) }

// LeaseLost is ErrLeaseLost for a stale token, naming who holds t now.
func LeaseLost(t *protocol.Task, token int64) error { return leaseLost(t, token) }

// ExhaustMessage is the error of a claimable task that has used all its
// attempts and fails instead of being claimed (t as it was).
func ExhaustMessage(t *protocol.Task) string {
	if t.Status == protocol.StatusClaimed && t.Claim != nil {
		return fmt.Sprintf("lease of worker %s expired at %s after attempt %d of %d", t.Claim.Worker, t.Claim.Until.Format(time.RFC3339), t.Attempts, t.MaxAttempts)
	}
	return fmt.Sprintf("no attempts left: %d of %d used", t.Attempts, t.MaxAttempts)
}

// DecodeStoredTask decodes a task record as another store or a wire sent
// it: exactly as encoded (EncodeTask), with the fields this version does
// not know in Extra, and nothing normalized.
func DecodeStoredTask(js []byte, t *protocol.Task) error { return decodeTask(js, t) }
