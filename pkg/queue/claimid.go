package queue

import (
	"context"
	"fmt"
)

// MaxClaimID is the longest claim id a store records.
const MaxClaimID = 64

// claimIDKey is the context key of WithClaimID.
type claimIDKey struct{}

// WithClaimID asks the WaitClaim called with the returned context to
// record id as its claim's id (protocol.Claim.ID): a client that loses
// the answer (the store agent's) finds that claim again by it, whatever
// the clocks say and whoever else claims under the same worker name.
// Claim takes no context: a claim with an id is a WaitClaim that does not
// wait.
func WithClaimID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, claimIDKey{}, id)
}

// ClaimID is the claim id of ctx (WithClaimID), or "".
func ClaimID(ctx context.Context) string {
	id, _ := ctx.Value(claimIDKey{}).(string)
	return id
}

// CheckClaimID refuses a claim id that is too long or not printable ASCII.
func CheckClaimID(id string) error {
	if len(id) > MaxClaimID {
		return &InputError{Index: -1, Msg: fmt.Sprintf("claim id of %d bytes: at most %d", len(id), MaxClaimID)}
	}
	for i := range len(id) {
		if id[i] <= ' ' || id[i] > '~' {
			return &InputError{Index: -1, Msg: fmt.Sprintf("claim id %q: printable ASCII without spaces only", id)}
		}
	}
	return nil
}
