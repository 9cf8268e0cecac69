package pgstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestConnectErrNamesTheServerOnce: an error named at two levels (migrate
// inside open) says "postgres" once; the agent's log showed "postgres:
// postgres: ...".
func TestConnectErrNamesTheServerOnce(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("postgres://u:secret@db.example:5433/team")
	if err != nil {
		t.Fatal(err)
	}
	base := errors.New("connection refused")
	got := connectErr(cfg, connectErr(cfg, base))
	if n := strings.Count(got.Error(), "postgres"); n != 1 {
		t.Errorf("%q names the server %d times", got, n)
	}
	if !errors.Is(got, base) {
		t.Errorf("%q does not wrap the cause", got)
	}
}
