package dial

import (
	"context"
	"errors"

	"github.com/powerglide/powerglide/pkg/store"
)

// The PostgreSQL store links pgx, its TLS and its networking: a binary
// that opens it directly registers it (import pkg/store/dial/pgdial), and
// one that does not (pg-loop) reaches PostgreSQL through a store agent
// (Options.Remote).
var postgres struct {
	open    func(ctx context.Context, url string, o Options) (store.Store, error)
	migrate func(ctx context.Context, url string) (int, error)
}

// RegisterPostgres makes this binary open PostgreSQL stores directly:
// open opens (and migrates) one, as o's OneShot and Began say; migrate
// applies the schema's migrations and returns the schema version.
func RegisterPostgres(open func(ctx context.Context, url string, o Options) (store.Store, error), migrate func(ctx context.Context, url string) (int, error)) {
	postgres.open, postgres.migrate = open, migrate
}

var errNoPostgres = errors.New("this program does not open PostgreSQL stores itself (its store agent does: pg-queue agent)")

// openPostgres opens the PostgreSQL store: through o.Remote when set,
// else directly.
func openPostgres(ctx context.Context, url string, o Options) (store.Store, error) {
	if o.Remote != nil {
		return o.Remote(ctx, url)
	}
	if postgres.open == nil {
		return nil, errNoPostgres
	}
	return postgres.open(ctx, url, o)
}

// migratePostgres applies the schema's migrations and returns the schema
// version.
func migratePostgres(ctx context.Context, url string) (int, error) {
	if postgres.migrate == nil {
		return 0, errNoPostgres
	}
	return postgres.migrate(ctx, url)
}
