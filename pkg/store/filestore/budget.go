package filestore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/gofrs/flock"
	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// Budget is budget.json, the team's budget ledger.
type Budget struct{ dir teamdir.Dir }

var _ store.Budget = (*Budget)(nil)

// Read reads budget.json; an error wrapping fs.ErrNotExist when there is
// none.
func (b *Budget) Read(context.Context) (*protocol.TeamBudget, error) {
	data, err := atomicfile.ReadFile(b.dir.Budget(), atomicfile.RecordLimit)
	if err != nil {
		return nil, err
	}
	var tb protocol.TeamBudget
	if err := json.Unmarshal(data, &tb); err != nil {
		return nil, fmt.Errorf("%s: %w", b.dir.Budget(), err)
	}
	return &tb, nil
}

// Update changes budget.json under the team lock, the flock that guards
// the queue: a ledger change is short, and one lock for the team's shared
// files keeps their order simple.
func (b *Budget) Update(ctx context.Context, fn func(old *protocol.TeamBudget) (*protocol.TeamBudget, error)) (*protocol.TeamBudget, error) {
	if err := b.dir.Ensure(); err != nil {
		return nil, err
	}
	lk := flock.New(b.dir.Lock())
	if err := lk.Lock(); err != nil {
		return nil, fmt.Errorf("lock %s: %w", b.dir.Lock(), err)
	}
	defer lk.Close()
	old, err := b.Read(ctx)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	tb, err := fn(old)
	if err != nil || tb == nil {
		return tb, err
	}
	data, err := json.MarshalIndent(tb, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(b.dir.Budget(), append(data, '\n'), teamdir.FileMode); err != nil {
		return nil, err
	}
	return tb, nil
}
