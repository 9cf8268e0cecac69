package queue

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// FuzzLoad feeds arbitrary task-queue.json and task-queue.idx contents to
// the loader: it may refuse them, never panic, and what it accepts can be
// claimed from and saved.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"type":"task-queue","version":1,"generation":3,"next_token":2,"archived":{},"finished_deps":{},"tasks":[`+"\n"+
		`{"id":"a","title":"a","status":"pending","priority":0,"depends_on":["b"],"labels":{},"attempts":0,"max_attempts":3,"claim":null,"result":null,"error":null,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"},`+"\n"+
		`{"id":"b","title":"b","status":"claimed","priority":0,"depends_on":[],"labels":{},"attempts":1,"max_attempts":3,"claim":{"worker":"w","token":1,"until":"2026-01-01T00:00:00Z"},"result":null,"error":null,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`+"\n]}\n"), []byte("PGQIDX1\n\x06\x00"))
	// A real pair, as the queue writes it.
	q, err := Open(teamdir.Dir{Home: f.TempDir(), Team: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	q.Add([]protocol.Task{{ID: "a", Title: "a"}, {ID: "b", Title: "b", DependsOn: []string{"a"}, Labels: map[string]string{"k": "v"}}})
	q.Claim("w", time.Minute)
	doc, _ := os.ReadFile(q.Dir().Queue())
	idx, _ := os.ReadFile(filepath.Join(q.Dir().Path(), IndexFile))
	f.Add(doc, idx)
	f.Add([]byte(`{"tasks":[{"id":"x","status":"done"}]}`), []byte{})
	f.Add([]byte(`{"tasks":[{"id":"x","status":"weird"}]}`), []byte("PGQIDX1\n"))
	f.Add([]byte("\n\n"), []byte("garbage"))
	f.Fuzz(func(t *testing.T, doc, idx []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "task-queue.json"), doc, 0o644)
		os.WriteFile(filepath.Join(dir, IndexFile), idx, 0o644)
		s, err := load(dir)
		if err != nil {
			return
		}
		defer s.close()
		if err := s.all(); err != nil {
			return
		}
		for _, e := range s.entries {
			if _, err := s.task(e); err != nil {
				return
			}
		}
		if err := s.save(dir, time.Now(), false); err != nil {
			t.Fatalf("save of a loaded queue: %v", err)
		}
		s2, err := load(dir)
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
		defer s2.close()
		if err := s2.all(); err != nil {
			t.Fatalf("reload: %v", err)
		}
		if len(s2.entries) != len(s.entries) {
			t.Fatalf("%d tasks after reload, want %d", len(s2.entries), len(s.entries))
		}
		for i, e := range s2.entries {
			tk, err := s2.task(e)
			if err != nil || tk.ID != s.entries[i].id {
				t.Fatalf("task %d after reload: %v %v", i, tk, err)
			}
			if _, ok := statusCode(tk.Status); !ok {
				t.Fatalf("bad status %q", tk.Status)
			}
		}
	})
}
