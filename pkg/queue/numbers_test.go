package queue

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// A lease past MaxLease is refused: its expiry would overflow Unix
// nanoseconds (year 2262) and count as expired at once, so a second worker
// got the same task. The longest lease allowed holds.
func TestLeaseBounds(t *testing.T) {
	q, c := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"})
	var ie *InputError
	if _, err := q.Claim("w1", 2562047*time.Hour); !errors.As(err, &ie) {
		t.Fatalf("claim with 2562047h: %v, want InputError", err)
	}
	got, err := q.Claim("w1", MaxLease)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Renew(got.ID, got.Claim.Token, MaxLease+time.Second); !errors.As(err, &ie) {
		t.Fatalf("renew past MaxLease: %v, want InputError", err)
	}
	c.add(24 * time.Hour)
	other, err := reopen(t, q).Claim("w2", time.Minute)
	if err != nil || other.ID == got.ID {
		t.Fatalf("second claim: %v %v: the first lease must hold", other, err)
	}
	if _, err := reopen(t, q).Claim("w3", time.Minute); !errors.Is(err, ErrNothing) {
		t.Fatalf("third claim: %v, want ErrNothing", err)
	}
}

// Bad input to a team that has no directory yet creates nothing; the first
// change that succeeds creates it.
func TestNothingCreatedOnBadInput(t *testing.T) {
	q, _ := open(t)
	dir := q.Dir().Path()
	if _, err := q.Add([]protocol.Task{{Title: "x", DependsOn: []string{"nosuch"}}}); err == nil {
		t.Fatal("unknown dependency accepted")
	}
	if _, err := q.List(ListOptions{Status: []string{"bogus"}}); err == nil {
		t.Fatal("unknown status accepted")
	}
	if _, err := q.Complete("t1", 1, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("complete: %v", err)
	}
	if _, err := q.Claim("w", time.Minute); !errors.Is(err, ErrNothing) {
		t.Fatalf("claim: %v", err)
	}
	if _, err := q.CancelAll([]string{"t1"}, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancel: %v", err)
	}
	if _, err := q.List(ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Stats(); err != nil {
		t.Fatal(err)
	}
	if ok, err := q.Settle(); !ok || err != nil {
		t.Fatalf("settle: %v %v", ok, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("team dir after bad input and reads: %v, want none", err)
	}
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b", DependsOn: []string{"a"}})
	if _, err := os.Stat(filepath.Join(dir, "task-queue.json")); err != nil {
		t.Fatal(err)
	}
}

// A dependency cycle in a file edited by hand: its tasks, and those that
// wait on them, are stuck, so the queue drains.
func TestCycleIsStuck(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "free", Title: "free"})
	doc := `{"tasks":[
{"id":"x","title":"x","depends_on":["y"]},
{"id":"y","title":"y","depends_on":["x"]},
{"id":"z","title":"z","depends_on":["y"]},
{"id":"self","title":"self","depends_on":["self"]},
{"id":"free","title":"free","status":"done"}]}`
	if err := os.WriteFile(q.Dir().Queue(), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := q.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Blocked != 4 || st.Stuck != 4 || !st.Drained {
		t.Fatalf("blocked %d stuck %d drained %v, want 4 4 true", st.Blocked, st.Stuck, st.Drained)
	}
}

// A document of a newer version is refused as bad input, and left as it is.
func TestNewerVersionRefused(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"})
	doc := []byte(`{"type":"task-queue","version":2,"generation":1,"next_token":1,"archived":{},"finished_deps":{},"tasks":[
{"id":"a","title":"a","status":"pending","priority":0,"depends_on":[],"labels":{},"attempts":0,"max_attempts":3,"claim":null,"result":null,"error":null,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}
]}
`)
	if err := os.WriteFile(q.Dir().Queue(), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	var fe *FileError
	if _, err := q.Claim("w", time.Minute); !errors.As(err, &fe) || !fe.BadInput() {
		t.Fatalf("claim on version 2: %v, want a FileError", err)
	}
	if _, err := q.Stats(); !errors.As(err, &fe) {
		t.Fatalf("stats on version 2: %v, want a FileError", err)
	}
	got, _ := os.ReadFile(q.Dir().Queue())
	if string(got) != string(doc) {
		t.Fatalf("file changed:\n%s", got)
	}
}
