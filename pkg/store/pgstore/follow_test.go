package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// begin opens a transaction on a connection of its own and gives it its
// xid, as a change has before it takes a journal number.
func begin(t *testing.T, url string) pgx.Tx {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "SELECT pg_current_xact_id()"); err != nil {
		t.Fatal(err)
	}
	return tx
}

// holdNumber opens a transaction that takes the next journal number for a
// record of team and does not commit: the change of another process still
// on its way to the disk.
func holdNumber(t *testing.T, url, team, rec string) pgx.Tx {
	t.Helper()
	tx := begin(t, url)
	if _, err := tx.Exec(t.Context(), `INSERT INTO journal (team, seq, record) VALUES ($1, nextval('journal_seq'), $2)`, team, rec); err != nil {
		t.Fatal(err)
	}
	return tx
}

// nextWithin returns the follower's next record, or "" after d.
func nextWithin(t *testing.T, f store.Follower, d time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	b, err := f.Next(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ""
		}
		t.Fatalf("next: %v", err)
	}
	return string(b)
}

// TestFollowOutOfOrderCommit: a record numbered n+1 that commits while n
// is still being committed comes out after n, not before it and not
// instead of it (a reader that asked only for numbers above the last one
// it returned would print n+1 and lose n). A number whose transaction
// rolls back is passed as soon as that transaction has ended. In
// "older-xid", the transaction of n+1 began (took its xid) before that of
// n: the holder of n is then newer than every transaction that had ended
// when n+1 became visible, so it is not in that snapshot's list of
// running transactions.
func TestFollowOutOfOrderCommit(t *testing.T) {
	url := pgtest.DB(t)
	s, err := pgstore.OpenStore(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tm, _ := s.Team("t")
	j := tm.Journal()
	if err := j.Append(t.Context(), map[string]any{"type": "x", "n": 0}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		commit, olderXID bool
	}{{"commit", true, false}, {"rollback", false, false}, {"older-xid", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := j.Follow(t.Context(), false)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var after pgx.Tx
			if tc.olderXID {
				after = begin(t, url)
			}
			held := holdNumber(t, url, "t", `{"type":"x","n":"held"}`)
			if after != nil {
				if _, err := after.Exec(t.Context(), `INSERT INTO journal (team, seq, record) VALUES ('t', nextval('journal_seq'), '{"n":"after","type":"x"}')`); err != nil {
					t.Fatal(err)
				}
				if err := after.Commit(t.Context()); err != nil {
					t.Fatal(err)
				}
			} else if err := j.Append(t.Context(), map[string]any{"type": "x", "n": "after"}); err != nil {
				t.Fatal(err)
			}
			if got := nextWithin(t, f, 500*time.Millisecond); got != "" {
				t.Fatalf("the follower returned %s while an earlier number was still being committed", got)
			}
			if tc.commit {
				if err := held.Commit(t.Context()); err != nil {
					t.Fatal(err)
				}
			} else if err := held.Rollback(t.Context()); err != nil {
				t.Fatal(err)
			}
			var got []string
			for {
				r := nextWithin(t, f, 2*time.Second)
				if r == "" {
					break
				}
				got = append(got, r)
				if strings.Contains(r, "after") {
					break
				}
			}
			want := `{"type":"x","n":"held"} {"n":"after","type":"x"}`
			if !tc.commit {
				want = `{"n":"after","type":"x"}`
			}
			if g := strings.Join(got, " "); g != want {
				t.Fatalf("records %s, want %s", g, want)
			}
		})
	}
}

// TestFollowPassesGapBesideLongTransaction: a transaction that runs for
// long with an xid but never touched the journal (a psql session left
// open, a batch job of another program on the same server) does not hold
// a follower at a gap it cannot fill: a number whose transaction rolled
// back is passed once that transaction has ended.
func TestFollowPassesGapBesideLongTransaction(t *testing.T) {
	url := pgtest.DB(t)
	s, err := pgstore.OpenStore(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tm, _ := s.Team("t")
	j := tm.Journal()
	if err := j.Append(t.Context(), map[string]any{"type": "x", "n": 0}); err != nil {
		t.Fatal(err)
	}
	f, err := j.Follow(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	long := begin(t, url) // an xid, older than the gap, and no journal lock
	defer long.Rollback(context.Background())
	held := holdNumber(t, url, "t", `{"type":"x","n":"held"}`)
	if err := j.Append(t.Context(), map[string]any{"type": "x", "n": "after"}); err != nil {
		t.Fatal(err)
	}
	if err := held.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := nextWithin(t, f, 3*time.Second); got != `{"n":"after","type":"x"}` {
		t.Fatalf("record %q, want the one after the rolled-back number (a transaction that holds no number held the follower)", got)
	}
}

// TestFollowCloseDuringRead: Close ends a Next whose read waits on the
// server (here for a lock on the journal), rather than after the read's
// own 30-second bound.
func TestFollowCloseDuringRead(t *testing.T) {
	url := pgtest.DB(t)
	s, err := pgstore.OpenStore(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tm, _ := s.Team("t")
	f, err := tm.Journal().Follow(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	lock := begin(t, url)
	defer lock.Rollback(context.Background())
	if _, err := lock.Exec(t.Context(), "LOCK TABLE journal IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	nextDone := make(chan error, 1)
	go func() {
		_, err := f.Next(context.Background())
		nextDone <- err
	}()
	time.Sleep(300 * time.Millisecond) // Next is reading, blocked by the lock
	closed := make(chan struct{})
	go func() { f.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waits 5s after it was called, behind a read blocked on the server")
	}
	select {
	case err := <-nextDone:
		if err == nil {
			t.Fatal("Next returned a record after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not end after Close")
	}
}
