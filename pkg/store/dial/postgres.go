package dial

import (
	"context"

	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
)

// openPostgres opens the PostgreSQL store (and migrates its schema).
func openPostgres(ctx context.Context, url string, oneShot bool) (store.Store, error) {
	return pgstore.OpenOptions(ctx, url, pgstore.Options{OneShot: oneShot})
}

// migratePostgres applies the schema's migrations and returns the schema
// version.
func migratePostgres(ctx context.Context, url string) (int, error) {
	if err := pgstore.Migrate(ctx, url); err != nil {
		return 0, err
	}
	return pgstore.SchemaVersion(), nil
}
