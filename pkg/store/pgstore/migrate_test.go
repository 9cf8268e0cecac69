package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
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

// TestMigrateFromSchema2WithRows: a database that an older powerglide
// filled (migrations 001-002, journals numbered per team from 1) takes the
// newer migrations, and its teams go on: the old records are read from the
// start, new records follow them in order on every team, tasks are
// claimed and completed.
func TestMigrateFromSchema2WithRows(t *testing.T) {
	url := pgtest.DB(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	for v, name := range []string{1: "team_store", 2: "task_events"} {
		if name == "" {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("migrations/%03d_%s.sql", v, name))
		if err != nil {
			t.Fatal(err)
		}
		exec(string(b))
		exec("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", v, name)
	}
	// What the older pg-queue wrote: per-team numbers, the counter in teams.
	exec(`INSERT INTO teams (team, next_seq) VALUES ('a', 4), ('b', 3)`)
	for _, r := range []struct {
		team string
		seq  int
	}{{"a", 1}, {"a", 2}, {"a", 3}, {"b", 1}, {"b", 2}} {
		exec(`INSERT INTO journal (team, seq, op, record) VALUES ($1, $2, 'note', json_build_object('type', 'old', 'n', $3::int))`, r.team, r.seq, r.seq)
	}
	exec(`INSERT INTO tasks (team, id, status, priority, depends_on, attempts, max_attempts, created_at, updated_at, spec)
		VALUES ('b', 't1', 'pending', 0, '{}', 0, 3, now(), now(), '{"id":"t1","title":"old task"}')`)

	s, err := pgstore.OpenStore(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		team string
		old  int
	}{{"b", 2}, {"a", 3}} {
		tm, _ := s.Team(tc.team)
		f, err := tm.Journal().Follow(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := tm.Journal().Append(ctx, map[string]any{"type": "new", "n": 1}, map[string]any{"type": "new", "n": 2}); err != nil {
			t.Fatalf("team %s: append after the migration: %v", tc.team, err)
		}
		var got []string
		for range tc.old + 2 {
			got = append(got, nextWithin(t, f, 5*time.Second))
		}
		var want []string
		for n := 1; n <= tc.old; n++ {
			want = append(want, fmt.Sprintf(`{"type" : "old", "n" : %d}`, n))
		}
		want = append(want, `{"n":1,"type":"new"}`, `{"n":2,"type":"new"}`)
		if g, w := strings.Join(got, " "), strings.Join(want, " "); g != w {
			t.Fatalf("team %s: records\n%s\nwant\n%s", tc.team, g, w)
		}
	}
	tm, _ := s.Team("b")
	task, err := tm.Tasks().Claim("w1", time.Minute)
	if err != nil || task == nil || task.ID != "t1" {
		t.Fatalf("claim of the old task: %v %v", task, err)
	}
	if _, err := tm.Tasks().Complete("t1", task.Claim.Token, nil); err != nil {
		t.Fatalf("complete: %v", err)
	}
}
