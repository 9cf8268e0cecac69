package queue

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// currentArchiveIndex reports how many lines the archive index lists, or
// -1 when it does not match the archive.
func currentArchiveIndex(t *testing.T, q *Queue) int {
	t.Helper()
	st, ok := q.archiveStamp()
	if !ok {
		t.Fatal("no archive")
	}
	ix, ok := readArchiveIndex(q.archiveIndexPath(), st)
	if !ok {
		return -1
	}
	n := 0
	if !ix.each(st.size, func(string, int64, int64) { n++ }) {
		return -1
	}
	return n
}

func TestArchiveIndex(t *testing.T) {
	q, c := open(t)
	q.KeepFinished = 2
	var in []protocol.Task
	for i := range 8 {
		in = append(in, protocol.Task{ID: fmt.Sprint("t", i), Title: "x"})
	}
	add(t, q, in...)
	for range 8 {
		c.add(time.Second)
		got, _ := q.Claim("w", time.Minute)
		q.Complete(got.ID, got.Claim.Token, nil)
	}
	st, _ := q.Stats()
	// Kept current as tasks are archived, not rebuilt.
	if n := currentArchiveIndex(t, q); n != st.Archived || n < 6 {
		t.Fatalf("archive index lists %d tasks, %d archived", n, st.Archived)
	}
	if _, err := q.Add([]protocol.Task{{ID: "t0", Title: "again"}}); err == nil || !strings.Contains(err.Error(), "already exists (archived)") {
		t.Fatalf("reused archived id: %v", err)
	}

	// A line appended by something else: the index no longer matches,
	// and the next lookup rebuilds it.
	f, _ := os.OpenFile(q.archivePath(), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"id":"hand","title":"hand","status":"cancelled"}` + "\n")
	f.Close()
	if n := currentArchiveIndex(t, q); n != -1 {
		t.Fatalf("index still matches after a foreign append: %d", n)
	}
	if got, err := q.Show("hand"); err != nil || got.Status != protocol.StatusCancelled {
		t.Fatalf("show of a hand-archived task: %v %+v", err, got)
	}
	if n := currentArchiveIndex(t, q); n != st.Archived+1 {
		t.Fatalf("rebuilt index lists %d tasks", n)
	}
	// A corrupt index is not trusted.
	os.WriteFile(q.archiveIndexPath(), []byte("PGQAIX1\ngarbage!"), 0o644)
	add(t, q, protocol.Task{ID: "late", Title: "late", DependsOn: []string{"t1"}})
	if got, err := q.Show("t1"); err != nil || got.Status != protocol.StatusDone {
		t.Fatalf("show t1: %v %+v", err, got)
	}
	// A prune's rewrite is indexed at once.
	if _, err := q.Prune(0); err != nil {
		t.Fatal(err)
	}
	if n := currentArchiveIndex(t, q); n != 0 {
		t.Fatalf("index after prune lists %d tasks", n)
	}
	checkFiles(t, q)
}

// BenchmarkAddArchivedIDs adds a task with an explicit id and a
// dependency on an archived task, with 20,000 tasks in the archive.
func BenchmarkAddArchivedIDs(b *testing.B) {
	dir, _ := teamdir.New(b.TempDir(), "bench")
	q, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	if err := dir.Ensure(); err != nil { // Open no longer creates it
		b.Fatal(err)
	}
	var arch strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&arch, `{"id":"a%d","title":"archived task %d","prompt":"do the thing described in the issue","status":"done","priority":0,"depends_on":[],"labels":{},"attempts":1,"max_attempts":3,"claim":{"worker":"w","token":%d,"until":"2026-01-01T00:00:00Z"},"result":null,"error":null,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`+"\n", i, i, i+1)
	}
	os.WriteFile(filepath.Join(q.dir.Path(), ArchiveFile), []byte(arch.String()), 0o644)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h, _ := Open(q.dir)
		h.NoSync = true
		if _, err := h.Add([]protocol.Task{{ID: fmt.Sprint("n", i), Title: "new", DependsOn: []string{fmt.Sprint("a", i%20000)}}}); err != nil {
			b.Fatal(err)
		}
	}
}
