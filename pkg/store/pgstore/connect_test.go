package pgstore_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/internal/testnet"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// refusedAddr is a local address where nothing listens, held until the
// test ends.
func refusedAddr(t *testing.T) string {
	addr, release, err := testnet.Refused()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return addr
}

// silentAddr is a local listener that accepts connections and never
// answers, closed when the test ends.
func silentAddr(t *testing.T) string {
	addr, stop, err := testnet.Silent()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr
}

// openErr opens url as pg-queue does (one-shot) and as the other tools do,
// and returns the error, the same from both.
func openErr(t *testing.T, url string, o pgstore.Options) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := pgstore.OpenOptions(ctx, url, o)
	if err == nil {
		s.Close()
		t.Fatalf("%s: opened", url)
	}
	return err
}

// TestConnectErrors: a connection that fails is one line naming the
// server, the user and the database, never the password, and the cause
// once: not the TLS refusal of sslmode=prefer's first attempt, not one
// "connection refused" per attempt. A server that does not answer is a
// timeout (context.DeadlineExceeded: exit 124).
func TestConnectErrors(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{HBA: []string{"host all alice all scram-sha-256"}})
	admin, err := pgx.Connect(t.Context(), srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(t.Context(), "CREATE ROLE alice LOGIN PASSWORD 'right'"); err != nil {
		t.Fatal(err)
	}
	admin.Close(t.Context())
	server := net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port))
	refused := refusedAddr(t)
	silent := silentAddr(t)

	for _, tc := range []struct {
		name, url, want string
		timeout         bool
	}{
		{"refused", "postgres://bob:s3cret@" + refused + "/team",
			"cannot connect to PostgreSQL at " + refused + " (user bob, database team): connection refused", false},
		{"refused-prefer", "postgres://bob:s3cret@" + refused + "/team?sslmode=prefer",
			"cannot connect to PostgreSQL at " + refused + " (user bob, database team): connection refused", false},
		{"silent", "postgres://bob:s3cret@" + silent + "/team?connect_timeout=1",
			"cannot connect to PostgreSQL at " + silent + " (user bob, database team): no answer within 1s (connect_timeout)", true},
		{"wrong-password", "postgres://alice:s3cret@" + server + "/postgres",
			"cannot connect to PostgreSQL at " + server + ` (user alice, database postgres): password authentication failed for user "alice" (28P01)`, false},
		{"unknown-user", "postgres://nobody:s3cret@" + server + "/postgres",
			"cannot connect to PostgreSQL at " + server + ` (user nobody, database postgres): role "nobody" does not exist (28000)`, false},
		{"unknown-database", "postgres://alice:right@" + server + "/nodb",
			"cannot connect to PostgreSQL at " + server + ` (user alice, database nodb): database "nodb" does not exist (3D000)`, false},
		{"two-hosts", "postgres://bob:s3cret@" + refused + "," + silent + "/team?connect_timeout=1",
			"cannot connect to PostgreSQL at " + refused + ", " + silent + " (user bob, database team): connection refused; no answer within 1s (connect_timeout)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, oneShot := range []bool{true, false} {
				err := openErr(t, tc.url, pgstore.Options{OneShot: oneShot})
				if err.Error() != tc.want {
					t.Errorf("one-shot %v:\n got %q\nwant %q", oneShot, err, tc.want)
				}
				if errors.Is(err, context.DeadlineExceeded) != tc.timeout {
					t.Errorf("one-shot %v: %q is a timeout: %v, want %v", oneShot, err, !tc.timeout, tc.timeout)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("the password shows: %q", err)
				}
			}
		})
	}
}

// TestConnectBegan: a connection that began before Open (pg-queue's
// fallback after its store agent) waits only for what is left of the
// connect timeout.
func TestConnectBegan(t *testing.T) {
	url := "postgres://bob@" + silentAddr(t) + "/team?connect_timeout=30"
	for _, oneShot := range []bool{true, false} { // pg-queue's fallback; a private store agent's
		start := time.Now()
		err := openErr(t, url, pgstore.Options{OneShot: oneShot, Began: start.Add(-29 * time.Second)})
		if !errors.Is(err, context.DeadlineExceeded) || !strings.HasSuffix(err.Error(), ": no answer within 30s (connect_timeout)") {
			t.Fatalf("one-shot %v: got %q", oneShot, err)
		}
		// Of the 30 s, 29 were spent before Open: not another 30.
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("one-shot %v: Open waited %s", oneShot, d)
		}
	}
}
