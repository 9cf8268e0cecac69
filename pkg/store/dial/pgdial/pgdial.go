// Package pgdial registers the PostgreSQL store with dial: a binary that
// opens PostgreSQL stores itself (pg-queue, pg-monitor, pg-dash) imports
// it for that effect. pg-loop does not: it reaches PostgreSQL through the
// host's store agent, and so does not link pgx.
package pgdial

import (
	"context"

	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/dial"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
)

func init() {
	dial.RegisterPostgres(
		func(ctx context.Context, url string, o dial.Options) (store.Store, error) {
			return pgstore.OpenOptions(ctx, url, pgstore.Options{OneShot: o.OneShot, Began: o.Began})
		},
		func(ctx context.Context, url string) (int, error) {
			if err := pgstore.Migrate(ctx, url); err != nil {
				return 0, err
			}
			return pgstore.SchemaVersion(), nil
		})
}
