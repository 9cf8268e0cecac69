package queue

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// checkIndex compares what the index says (walked in place and decoded)
// with what task-queue.json holds.
func checkIndex(t *testing.T, q *Queue) {
	t.Helper()
	dir := q.Dir().Path()
	s, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if s.lazy == nil {
		t.Fatal("the index does not match task-queue.json after a change")
	}
	var walked []entry
	if !s.lazy.each(s.stat.size, true, func(_ int, e *entry, _ bool) bool {
		w := *e // e is reused by the walk: copied, with its own deps
		w.deps = append([]string(nil), e.deps...)
		walked = append(walked, w)
		return true
	}) {
		t.Fatal("malformed index")
	}
	if err := s.all(); err != nil {
		t.Fatal(err)
	}
	if err := s.readAll(); err != nil {
		t.Fatal(err)
	}
	if !s.parseLines() {
		t.Fatal("task-queue.json is not in the queue's layout")
	}
	if len(walked) != len(s.entries) {
		t.Fatalf("index walks %d tasks, the file has %d", len(walked), len(s.entries))
	}
	for i, e := range s.entries {
		w := walked[i]
		if len(w.deps) == 0 {
			w.deps = []string{}
		}
		if e.deps == nil {
			e.deps = []string{}
		}
		if !reflect.DeepEqual(w, *e) {
			t.Fatalf("task %d: index %+v, file %+v", i, w, *e)
		}
	}
}

// TestIndexInPlace runs random changes, each through a fresh handle (as a
// process would: the index walked in place, only changed records
// rewritten), and checks after each that the index describes the file.
func TestIndexInPlace(t *testing.T) {
	q, c := open(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var in []protocol.Task
	for i := range 30 {
		tk := protocol.Task{ID: fmt.Sprint("t", i), Title: fmt.Sprint("task ", i), Priority: rng.IntN(3), MaxAttempts: 2 + rng.IntN(3)}
		if i > 20 {
			tk.DependsOn = []string{fmt.Sprint("t", rng.IntN(20))}
		}
		in = append(in, tk)
	}
	add(t, q, in...)
	checkIndex(t, q)
	held := map[string]int64{}
	for step := range 300 {
		h := reopen(t, q)
		c.add(time.Duration(rng.IntN(40)) * time.Second)
		var err error
		switch op := rng.IntN(8); {
		case op < 3:
			var got *protocol.Task
			if got, err = h.Claim(fmt.Sprint("w", rng.IntN(3)), time.Minute); err == nil {
				held[got.ID] = got.Claim.Token
			}
		case len(held) > 0 && op < 7:
			for id, tok := range held {
				switch op {
				case 3, 4:
					_, err = h.Complete(id, tok, []byte(fmt.Sprintf(`{"step":%d,"pad":"%*s"}`, step, rng.IntN(50), "")))
				case 5:
					_, err = h.Fail(id, tok, "flaky", true)
				case 6:
					_, err = h.Renew(id, tok, time.Duration(rng.IntN(90))*time.Second)
				}
				if op != 6 {
					delete(held, id)
				}
				break
			}
		default:
			_, err = h.Add([]protocol.Task{{Title: fmt.Sprint("late ", step), Priority: rng.IntN(3)}})
		}
		if err != nil && !errors.Is(err, ErrNothing) && !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("step %d: %v", step, err)
		}
		checkIndex(t, q)
	}
	checkFiles(t, q)
}

// TestIndexTruncatedUnderReader: the caches are read into memory, so a
// reader holding one survives the file being truncated in place (by hand,
// by a full disk's repair, by another program): with the file mapped, its
// next look at a page past the new end was a SIGBUS that killed the
// process. A fault is turned into a panic here, to fail the test instead.
func TestIndexTruncatedUnderReader(t *testing.T) {
	q, _ := open(t)
	q.KeepFinished = 1
	var in []protocol.Task
	for i := range 400 { // an index of several pages
		in = append(in, protocol.Task{ID: fmt.Sprintf("task-%04d", i), Title: "x", DependsOn: []string{"task-0000"}[:min(i, 1)]})
	}
	add(t, q, in...)
	for range 3 { // an archive, and its index
		got, err := q.Claim("w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Complete(got.ID, got.Claim.Token, nil); err != nil {
			t.Fatal(err)
		}
	}
	dir := q.Dir().Path()
	s, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if s.lazy == nil {
		t.Fatal("no index read")
	}
	st, ok := q.archiveStamp()
	if !ok {
		t.Fatal("no archive")
	}
	ix, ok := readArchiveIndex(q.archiveIndexPath(), st)
	if !ok {
		t.Fatal("no archive index read")
	}
	for _, f := range []string{IndexFile, ArchiveIndexFile} {
		if err := os.Truncate(filepath.Join(dir, f), 0); err != nil {
			t.Fatal(err)
		}
	}

	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("reading an index truncated under the reader: %v", r)
		}
	}()
	n := 0
	if !s.lazy.each(s.stat.size, true, func(_ int, e *entry, _ bool) bool { n += len(e.id); return true }) || n == 0 {
		t.Fatal("the index read before the truncation is no longer whole")
	}
	if !ix.each(st.size, func(id string, _, _ int64) { n += len(id) }) {
		t.Fatal("the archive index read before the truncation is no longer whole")
	}
	if live := s.lazy.count; s.all() != nil || len(s.entries) != live || live < len(in)-3 {
		t.Fatalf("decoded %d entries after the truncation: %v", len(s.entries), err)
	}
}

// TestIndexMismatch: an index whose checks pass but whose lengths do not
// add up to the file is not trusted.
func TestIndexMismatch(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"})
	s, _ := load(q.Dir().Path())
	s.lazy.patch = map[int]*entry{0: {id: "a", n: 5, status: stPending, maxAttempts: 3}}
	s.lazy.patch[0].raw = []byte("{}")
	s.settled = true
	// An index claiming a's line is 5 bytes long.
	s.lazy.patch[0].n = 5
	writeIndex(filepath.Join(q.Dir().Path(), IndexFile), s.hdr.Generation, s.stat, s.base, nil, s.lazy)
	s.close()
	got, err := reopen(t, q).Show("b")
	if err != nil || got.ID != "b" {
		t.Fatalf("show with a bad index: %v %+v", err, got)
	}
	if _, err := os.Stat(q.Dir().Queue()); err != nil {
		t.Fatal(err)
	}
}
