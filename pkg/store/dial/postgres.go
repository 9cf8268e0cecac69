package dial

import (
	"context"
	"errors"

	"github.com/powerglide/powerglide/pkg/store"
)

// openPostgres opens the PostgreSQL store.
func openPostgres(ctx context.Context, url string) (store.Store, error) {
	return nil, errors.New("the PostgreSQL store is not in this build yet")
}

// migratePostgres applies the schema's migrations and returns the schema
// version.
func migratePostgres(ctx context.Context, url string) (int, error) {
	return 0, errors.New("the PostgreSQL store is not in this build yet")
}
