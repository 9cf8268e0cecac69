package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// oneShot opens a one-shot store (as pg-queue's commands do) that counts
// its round trips in trips.
func oneShot(t *testing.T, url string, trips *atomic.Int64) *pgstore.Store {
	t.Helper()
	s, err := pgstore.OpenCountingOptions(t.Context(), url, trips, pgstore.Options{OneShot: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestOneShotRoundTrips: a pg-queue command's claim or complete, in a
// process of its own, costs one round trip after connecting: the schema
// check travels with the statement, and so does the NOTIFY after the
// commit, sent only when the statement changed a row (a listener receives
// the claim's and the complete's, not that of a claim that found
// nothing). Before, each cost three (check, statement, NOTIFY).
func TestOneShotRoundTrips(t *testing.T) {
	url := pgtest.DB(t)
	ctx := t.Context()
	setup, err := pgstore.OpenStore(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	st, _ := setup.Team("t")
	if _, err := st.Tasks().Add([]protocol.Task{{ID: "a", Title: "a"}}); err != nil {
		t.Fatal(err)
	}
	setup.Close() // its notifier's NOTIFY of the add goes out before the LISTEN
	if setup, err = pgstore.OpenStore(ctx, url); err != nil {
		t.Fatal(err)
	}
	defer setup.Close()
	st, _ = setup.Team("t")
	listener, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	if _, err := listener.Exec(ctx, `LISTEN "`+pgstore.Channel("t")+`"`); err != nil {
		t.Fatal(err)
	}

	var trips atomic.Int64
	claimer := oneShot(t, url, &trips)
	if n := trips.Load(); n != 1 {
		t.Fatalf("open: %d round trips, want 1 (connect)", n)
	}
	ct, _ := claimer.Team("t")
	task, err := ct.Tasks().Claim("w1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := trips.Load(); n != 2 {
		t.Fatalf("open and claim: %d round trips, want 2 (connect, claim)", n)
	}
	claimer.Close()

	trips.Store(0)
	completer := oneShot(t, url, &trips)
	ct, _ = completer.Team("t")
	if _, err := ct.Tasks().Complete("a", task.Claim.Token, []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := trips.Load(); n != 2 {
		t.Fatalf("open and complete: %d round trips, want 2 (connect, complete)", n)
	}
	completer.Close()
	// A claim that finds nothing wakes no one.
	if _, err := oneShotTeam(t, url).Tasks().Claim("w2", time.Minute); !errors.Is(err, queue.ErrNothing) {
		t.Fatalf("claim of nothing: %v", err)
	}
	var payloads []string
	for {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		n, err := listener.WaitForNotification(wctx)
		cancel()
		if err != nil {
			break
		}
		payloads = append(payloads, n.Payload)
	}
	if fmt.Sprintf("%q", payloads) != `["" "work"]` {
		t.Fatalf("notifications %q, want the claim's and the complete's: [\"\" \"work\"]", payloads)
	}
	got, err := st.Tasks().Show("a")
	if err != nil || got.Status != protocol.StatusDone {
		t.Fatalf("after the complete: %+v %v", got, err)
	}
}

// TestOneShotSchemaCheck: a one-shot store that checks the schema only in
// the round trip of its first change still migrates a new database on
// first use, takes a database that an older build migrated (no schema
// marker yet), and refuses one that a newer powerglide migrated, before
// changing anything, on the guarded path (claim) and the others (stats).
func TestOneShotSchemaCheck(t *testing.T) {
	ctx := t.Context()
	url := pgtest.DB(t)
	// A new database: migrated by the first claim.
	s := openOneShot(t, url)
	tm, _ := s.Team("t")
	if _, err := tm.Tasks().Claim("w1", time.Minute); !errors.Is(err, queue.ErrNothing) {
		t.Fatalf("claim on a new database: %v", err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v int
	if err := conn.QueryRow(ctx, "SELECT max(version) FROM schema_migrations").Scan(&v); err != nil || v != pgstore.SchemaVersion() {
		t.Fatalf("after the first claim: schema %d, %v", v, err)
	}
	marker := "powerglide_schema_v" + strconv.Itoa(pgstore.SchemaVersion())
	// Migrated by a build without markers: the marker is made.
	if _, err := conn.Exec(ctx, "DROP FUNCTION "+marker+"()"); err != nil {
		t.Fatal(err)
	}
	s = openOneShot(t, url)
	tm, _ = s.Team("t")
	if _, err := tm.Tasks().Add([]protocol.Task{{ID: "a", Title: "a"}}); err != nil {
		t.Fatal(err)
	}
	s = openOneShot(t, url)
	tm, _ = s.Team("t")
	if _, err := tm.Tasks().Claim("w1", time.Minute); err != nil {
		t.Fatalf("claim without a marker: %v", err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_proc WHERE proname = $1", marker).Scan(&n); err != nil || n != 1 {
		t.Fatalf("marker %s: %d, %v", marker, n, err)
	}
	// Migrated by a newer powerglide, which drops the older markers.
	if _, err := conn.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES (9999, 'future'); DROP FUNCTION "+marker+"(); "+
		"CREATE FUNCTION powerglide_schema_v9999() RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT 9999'"); err != nil {
		t.Fatal(err)
	}
	if _, err := oneShotTeam(t, url).Tasks().Add([]protocol.Task{{ID: "b", Title: "b"}}); err == nil || !strings.Contains(err.Error(), "newer than this program knows") {
		t.Fatalf("add on a newer schema: %v", err)
	}
	if _, err := oneShotTeam(t, url).Tasks().Claim("w2", time.Minute); err == nil || !strings.Contains(err.Error(), "newer than this program knows") {
		t.Fatalf("claim on a newer schema: %v", err)
	}
	if _, err := oneShotTeam(t, url).Tasks().Stats(); err == nil || !strings.Contains(err.Error(), "newer than this program knows") {
		t.Fatalf("stats on a newer schema: %v", err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM tasks WHERE status <> 'pending' OR id = 'b'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the newer schema was changed: %d rows claimed or added, %v", n, err)
	}
}

// openOneShot opens a one-shot store (as pg-queue's commands do).
func openOneShot(t *testing.T, url string) store.Store {
	t.Helper()
	s, err := pgstore.OpenOptions(t.Context(), url, pgstore.Options{OneShot: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// oneShotTeam is team t of a new one-shot store.
func oneShotTeam(t *testing.T, url string) store.Team {
	t.Helper()
	tm, err := openOneShot(t, url).Team("t")
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestPoolLeavesNoChangedFlag: a long-lived store's claim sets the flag
// that a one-shot store's NOTIFY reads for its transaction only, so that a
// connection that a pooler hands on to a pg-queue command afterwards does
// not make that command's claim of nothing notify.
func TestPoolLeavesNoChangedFlag(t *testing.T) {
	s, err := pgstore.OpenStore(t.Context(), pgtest.DB(t)+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tm, _ := s.Team("t")
	if _, err := tm.Tasks().Add([]protocol.Task{{ID: "a", Title: "a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Tasks().Claim("w1", time.Minute); err != nil {
		t.Fatal(err)
	}
	var flag *string
	if err := s.Pool().QueryRow(t.Context(), "SELECT current_setting('powerglide.changed', true)").Scan(&flag); err != nil {
		t.Fatal(err)
	}
	if flag != nil && *flag == "on" {
		t.Fatal("the claim left powerglide.changed on for the session")
	}
}

// TestMarkerNotRequiredOfAPlainRole: a role that may use the tables but not
// create functions (PostgreSQL 15's default in schema public) still opens
// a database that a build without markers migrated, long-lived and one
// shot: the marker is an optimisation, its absence the slow path.
func TestMarkerNotRequiredOfAPlainRole(t *testing.T) {
	ctx := t.Context()
	url := pgtest.DB(t)
	s, err := pgstore.OpenStore(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	role := "plain_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := conn.Exec(ctx, "DROP FUNCTION powerglide_schema_v"+strconv.Itoa(pgstore.SchemaVersion())+"();"+
		"CREATE ROLE "+role+" LOGIN; REVOKE CREATE ON SCHEMA public FROM PUBLIC;"+
		"GRANT USAGE ON SCHEMA public TO "+role+"; GRANT ALL ON ALL TABLES IN SCHEMA public TO "+role+";"+
		"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "+role+";"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role)
	})
	plain := strings.Replace(url, "postgres://postgres@", "postgres://"+role+"@", 1)
	if plain == url {
		t.Fatalf("no user in %s", url)
	}
	ps, err := pgstore.OpenStore(ctx, plain)
	if err != nil {
		t.Fatalf("long-lived open as a plain role: %v", err)
	}
	ps.Close()
	tm := oneShotTeam(t, plain)
	if _, err := tm.Tasks().Add([]protocol.Task{{ID: "a", Title: "a"}}); err != nil {
		t.Fatalf("one-shot add as a plain role: %v", err)
	}
	if _, err := oneShotTeam(t, plain).Tasks().Claim("w1", time.Minute); err != nil {
		t.Fatalf("one-shot claim as a plain role: %v", err)
	}
}

// TestOneShotNotifyFailureIsNotTheChanges: the NOTIFY after a one-shot
// change's COMMIT is best effort, as the notifier's: when it fails (here a
// pg_notify of the search path that raises, as a full notification queue
// would), the claim and the complete, committed, still report success.
func TestOneShotNotifyFailureIsNotTheChanges(t *testing.T) {
	ctx := t.Context()
	url := pgtest.DB(t)
	tm := oneShotTeam(t, url)
	if _, err := tm.Tasks().Add([]protocol.Task{{ID: "a", Title: "a"}}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE FUNCTION public.pg_notify(text, text) RETURNS void LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'too many notifications in the NOTIFY queue'; END$$`); err != nil {
		t.Fatal(err)
	}
	failing := url + "&search_path=public,pg_catalog"
	if !strings.Contains(url, "?") {
		failing = url + "?search_path=public,pg_catalog"
	}
	c, err := oneShotTeam(t, failing).Tasks().Claim("w1", time.Minute)
	if err != nil {
		t.Fatalf("claim, committed, with a failing NOTIFY: %v", err)
	}
	if _, err := oneShotTeam(t, failing).Tasks().Complete("a", c.Claim.Token, nil); err != nil {
		t.Fatalf("complete, committed, with a failing NOTIFY: %v", err)
	}
	var status string
	if err := conn.QueryRow(ctx, "SELECT status FROM tasks WHERE id = 'a'").Scan(&status); err != nil || status != "done" {
		t.Fatalf("status %q, %v", status, err)
	}
}
