package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
)

// budget is the team's budget ledger: its row of budgets. pkg/ledger
// keeps the rules.
type budget struct {
	s    *Store
	team string
}

var _ store.Budget = (*budget)(nil)

func decodeBudget(team string, b []byte) (*protocol.TeamBudget, error) {
	var tb protocol.TeamBudget
	if err := json.Unmarshal(b, &tb); err != nil {
		return nil, fmt.Errorf("budget of team %s: %w", team, err)
	}
	return &tb, nil
}

// Read returns the ledger, or an error wrapping fs.ErrNotExist.
func (bu *budget) Read(ctx context.Context) (*protocol.TeamBudget, error) {
	var b []byte
	err := bu.s.pool.QueryRow(ctx, `SELECT document FROM budgets WHERE team = $1 AND document IS NOT NULL`, bu.team).Scan(&b)
	if isNoRows(err) {
		return nil, fmt.Errorf("budget of team %s: %w", bu.team, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	return decodeBudget(bu.team, b)
}

// Update changes the ledger under its row lock, made first when there is
// none, so that two first updates also take turns.
func (bu *budget) Update(ctx context.Context, fn func(old *protocol.TeamBudget) (*protocol.TeamBudget, error)) (*protocol.TeamBudget, error) {
	var out *protocol.TeamBudget
	err := bu.s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO budgets (team) VALUES ($1) ON CONFLICT DO NOTHING`, bu.team); err != nil {
			return err
		}
		var b []byte
		if err := tx.QueryRow(ctx, `SELECT document FROM budgets WHERE team = $1 FOR UPDATE`, bu.team).Scan(&b); err != nil {
			return err
		}
		var old *protocol.TeamBudget
		if b != nil {
			var err error
			if old, err = decodeBudget(bu.team, b); err != nil {
				return err
			}
		}
		tb, err := fn(old)
		if err != nil || tb == nil {
			out = tb
			return err
		}
		doc, err := json.Marshal(tb)
		if err != nil {
			return err
		}
		out = tb
		_, err = tx.Exec(ctx, `UPDATE budgets SET document = $2::json, updated_at = now() WHERE team = $1`, bu.team, string(doc))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
