package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// TestMigrateOnceUnderConcurrency: first uses racing each other apply
// each migration once; a schema newer than the program is refused.
func TestMigrateOnceUnderConcurrency(t *testing.T) {
	url := pgtest.DB(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Go(func() {
			if i%2 == 0 {
				errs <- pgstore.Migrate(ctx, url)
				return
			}
			s, err := pgstore.Open(ctx, url)
			if err == nil {
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n, top int
	if err := conn.QueryRow(ctx, "SELECT count(*), max(version) FROM schema_migrations").Scan(&n, &top); err != nil {
		t.Fatal(err)
	}
	if n != pgstore.SchemaVersion() || top != pgstore.SchemaVersion() || top < 1 {
		t.Fatalf("%d migrations recorded, newest %d; want %d", n, top, pgstore.SchemaVersion())
	}
	if _, err := conn.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES (9999, 'future')"); err != nil {
		t.Fatal(err)
	}
	err = pgstore.Migrate(ctx, url)
	if err == nil || !strings.Contains(err.Error(), "newer than this program knows") {
		t.Fatalf("a newer schema: %v", err)
	}
}

// TestOpenErrors: a URL the driver cannot read is bad input; a server that
// does not answer is an error that names it, without the password.
func TestOpenErrors(t *testing.T) {
	_, err := pgstore.Open(t.Context(), "postgres://u:pw@h:notaport/db")
	var bi interface{ BadInput() bool }
	if !errors.As(err, &bi) || !bi.BadInput() {
		t.Fatalf("bad URL: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err = pgstore.Open(ctx, "postgres://u:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("unreachable server: %v", err)
	}
	if errors.As(err, &bi) && bi.BadInput() {
		t.Fatalf("an unreachable server is not bad input: %v", err)
	}
}
