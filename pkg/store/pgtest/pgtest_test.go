package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func query(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT 41 + 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Two databases of the shared server are independent; both answer.
func TestSharedServerGivesFreshDatabases(t *testing.T) {
	a, b := DB(t), DB(t)
	if a == b {
		t.Fatalf("two tests got one database: %s", a)
	}
	if query(t, a) != 42 || query(t, b) != 42 {
		t.Fatal("bad answer")
	}
	// Tables of one are not in the other.
	ctx := context.Background()
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE only_here (x int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	if _, err := cb.Exec(ctx, "SELECT * FROM only_here"); err == nil {
		t.Fatal("a table of database a is seen in database b")
	}
}

// A server of a test's own restarts on the same port, keeps its data, and
// is gone (directory and process) after Remove.
func TestOwnServerRestartsAndIsRemoved(t *testing.T) {
	s, err := NewServer(Options{})
	if err != nil {
		Unavailable(t, err)
	}
	url := s.DB(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	port := s.Port
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Port != port {
		t.Fatalf("restarted on port %d, was %d", s.Port, port)
	}
	if _, err := c.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a connection from before the restart still works")
	}
	c.Close(ctx)
	c, err = pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var x int
	if err := c.QueryRow(ctx, "SELECT x FROM kept").Scan(&x); err != nil || x != 7 {
		t.Fatalf("after restart: %d, %v", x, err)
	}
	c.Close(ctx)
	if os.Geteuid() == 0 {
		// As root, the cluster belongs to the postgres user.
		fi, err := os.Stat(s.data())
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid == 0 || s.cred == nil || uid != s.cred.Uid {
			t.Fatalf("data directory owned by uid %d, want the postgres user", uid)
		}
	}
	dir := s.Dir
	if err := s.DropDB(ctx, url); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("server directory left behind: %v", err)
	}
	if _, err := pgx.Connect(ctx, url); err == nil {
		t.Fatal("the removed server still answers")
	}
}

// TestOrphanIsReaped: a server whose test process died without its
// cleanup is stopped and removed by the next server's start.
func TestOrphanIsReaped(t *testing.T) {
	s, err := NewServer(Options{})
	if err != nil {
		Unavailable(t, err)
	}
	defer s.Remove()
	// Its owner "dies": the lock is released, and the file is older than
	// a server being set up.
	s.owner.Close()
	s.owner = nil
	old := time.Now().Add(-2 * orphanAge)
	if err := os.Chtimes(filepath.Join(s.Dir, ownerFile), old, old); err != nil {
		t.Fatal(err)
	}
	// A server whose owner lives is left alone, however old.
	live, err := NewServer(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Remove()
	if err := os.Chtimes(filepath.Join(live.Dir, ownerFile), old, old); err != nil {
		t.Fatal(err)
	}
	url := s.URL("postgres")
	s2 := Start(t, Options{})
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("the orphan's directory is still there: %v", err)
	}
	if _, err := pgx.Connect(t.Context(), url); err == nil {
		t.Fatal("the orphan still answers")
	}
	if _, err := os.Stat(live.Dir); err != nil {
		t.Fatalf("a live owner's server was reaped: %v", err)
	}
	if query(t, s2.URL("postgres")) != 42 {
		t.Fatal("the new server does not answer")
	}
}
