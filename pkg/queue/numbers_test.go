package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

func TestJSONDepth(t *testing.T) {
	cases := map[string]int{
		`1`: 0, `"[[["`: 0, `[]`: 1, `{"a":1}`: 1, `[[],[[]]]`: 3, `{"a":"}]\"[","b":[{}]}`: 3,
		strings.Repeat("[", 300) + strings.Repeat("]", 300): 300,
	}
	for in, want := range cases {
		if got := jsonDepth([]byte(in)); got != want {
			t.Errorf("jsonDepth(%.20s) = %d, want %d", in, got, want)
		}
	}
}

// A result nested deeper than task-queue.json can hold for jq is refused;
// the deepest allowed keeps the whole document within MaxDepth.
func TestResultDepth(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"})
	got, err := q.Claim("w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	nest := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	var ie *InputError
	if _, err := q.Complete("a", got.Claim.Token, nest(300)); !errors.As(err, &ie) {
		t.Fatalf("300 levels: %v, want InputError", err)
	}
	if _, err := q.Complete("a", got.Claim.Token, nest(maxValueDepth+1)); !errors.As(err, &ie) {
		t.Fatalf("%d levels: %v, want InputError", maxValueDepth+1, err)
	}
	if _, err := q.Complete("a", got.Claim.Token, nest(maxValueDepth)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(q.Dir().Queue())
	if err != nil {
		t.Fatal(err)
	}
	if d := jsonDepth(data); d != MaxDepth {
		t.Fatalf("task-queue.json nests %d levels, want %d", d, MaxDepth)
	}
}

// archiveIDs returns the ids of task-archive.jsonl, line by line.
func archiveIDs(t *testing.T, q *Queue) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(q.Dir().Path(), ArchiveFile))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		id, ok := archivedID([]byte(line))
		if !ok {
			t.Fatalf("archive line %q", line)
		}
		ids = append(ids, id)
	}
	return ids
}

// A change stopped after appending to the archive but before its commit
// leaves lines of tasks that are still live; the next change cuts them off
// before archiving again, so the archive holds each task once.
func TestArchiveStaysUnique(t *testing.T) {
	q, clk := open(t)
	var tasks []protocol.Task
	for i := range 6 {
		tasks = append(tasks, protocol.Task{ID: fmt.Sprint("a", i), Title: "a"})
	}
	add(t, q, tasks...)
	for range tasks {
		got, err := q.Claim("w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Complete(got.ID, got.Claim.Token, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Archive two tasks, then stop two archivings at "prepared".
	if n, err := q.Archive(0); err != nil || n != 6 {
		t.Fatalf("archive: %d %v", n, err)
	}
	add(t, q, protocol.Task{ID: "b", Title: "b"})
	got, _ := q.Claim("w", time.Minute)
	q.Complete(got.ID, got.Claim.Token, nil)
	for range 2 {
		h := reopen(t, q)
		h.Crash = func(point string) bool { return point == "prepared" }
		if _, err := h.Archive(0); !errors.Is(err, errCrashed) {
			t.Fatalf("archive: %v, want the crash", err)
		}
	}
	// The second cut off what the first appended.
	if ids := archiveIDs(t, q); len(ids) != 7 {
		t.Fatalf("after the stopped archivings the archive holds %v", ids)
	}
	if n, err := reopen(t, q).Archive(0); err != nil || n != 1 {
		t.Fatalf("archive: %d %v", n, err)
	}
	ids := archiveIDs(t, q)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("task %s archived twice: %v", id, ids)
		}
		seen[id] = true
	}
	if len(ids) != 7 {
		t.Fatalf("archive holds %v, want the 7 tasks", ids)
	}
	st, err := q.Stats()
	if err != nil || st.Done != 7 || st.Archived != 7 {
		t.Fatalf("stats %+v %v", st, err)
	}
	// An archive written before this rule may hold a copy: a prune
	// rewrites the archive without it.
	clk.add(2 * time.Hour)
	add(t, q, protocol.Task{ID: "c", Title: "c"})
	got, _ = q.Claim("w", time.Minute)
	q.Complete(got.ID, got.Claim.Token, nil)
	if n, err := q.Archive(0); err != nil || n != 1 {
		t.Fatalf("archive c: %d %v", n, err)
	}
	path := filepath.Join(q.Dir().Path(), ArchiveFile)
	data, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(data), "\n")
	os.WriteFile(path, append(data, lines[len(lines)-2]...), 0o644) // c again
	qdata, _ := os.ReadFile(q.Dir().Queue())
	legacy := regexp.MustCompile(`"archive_size":\d+,`).ReplaceAll(qdata, nil)
	if len(legacy) == len(qdata) {
		t.Fatal("no archive_size in the header")
	}
	os.WriteFile(q.Dir().Queue(), legacy, 0o644)
	if n, err := reopen(t, q).Prune(time.Hour); err != nil || n != 7 {
		t.Fatalf("prune: %d %v", n, err)
	}
	if ids := archiveIDs(t, q); len(ids) != 1 || ids[0] != "c" {
		t.Fatalf("after the prune the archive holds %v", ids)
	}
}

func TestUnknownFields(t *testing.T) {
	obj := []byte(`{ "id" : "a", "Status":"pending", "x\u0079":[1,{"}":"]"}], "note": "a \"quoted\" }", "n":-1.5e3 , "labels":{"k":"v"}}`)
	got := unknownFields(obj, taskKeys())
	want := map[string]string{"xy": `[1,{"}":"]"}]`, "note": `"a \"quoted\" }"`, "n": `-1.5e3`}
	if len(got) != len(want) {
		t.Fatalf("unknown fields %v, want %v", got, want)
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
	if unknownFields([]byte(`{"id":"a","title":"t","claim":{"worker":"w"}}`), taskKeys()) != nil {
		t.Error("known fields reported unknown")
	}
	out := withExtra([]byte(`{"id":"a"}`), got)
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil || len(back) != 4 {
		t.Fatalf("withExtra: %s %v", out, err)
	}
	if string(withExtra([]byte(`{}`), map[string]json.RawMessage{"a": []byte(`1`)})) != `{"a":1}` {
		t.Error("withExtra on an empty object")
	}
}

// Fields added by hand, to a task or to the document, survive every
// rewrite of task-queue.json (DESIGN.md §3: fields may be added), and show
// in the task as printed.
func TestUnknownFieldsKept(t *testing.T) {
	for _, layout := range []string{"own", "pretty"} {
		t.Run(layout, func(t *testing.T) {
			q, _ := open(t)
			add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"})
			data, err := os.ReadFile(q.Dir().Queue())
			if err != nil {
				t.Fatal(err)
			}
			s := strings.Replace(string(data), `{"id":"a",`, `{"id":"a","owner":"ann","meta":{"cost":[1,2]},`, 1)
			s = strings.Replace(s, `{"id":"b",`, `{"id":"b","owner":"bob",`, 1)
			s = strings.Replace(s, `{"type":"task-queue",`, `{"type":"task-queue","note":"edited by hand",`, 1)
			if layout == "pretty" {
				var v any
				json.Unmarshal([]byte(s), &v)
				b, _ := json.MarshalIndent(v, "", "  ")
				s = string(b)
			}
			if err := os.WriteFile(q.Dir().Queue(), []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(q.Dir().Path(), IndexFile))
			got, err := reopen(t, q).Claim("w", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Extra["owner"]) != `"ann"` || string(got.Extra["meta"]) != `{"cost":[1,2]}` {
				t.Fatalf("claimed task extra %v", got.Extra)
			}
			if _, err := reopen(t, q).Complete("a", got.Claim.Token, json.RawMessage(`{"ok":true}`)); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Note  string `json:"note"`
				Tasks []struct {
					ID, Owner, Status string
					Meta              json.RawMessage
				} `json:"tasks"`
			}
			data, _ = os.ReadFile(q.Dir().Queue())
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Note != "edited by hand" || len(doc.Tasks) != 2 || doc.Tasks[0].Owner != "ann" || doc.Tasks[0].Status != "done" ||
				string(doc.Tasks[0].Meta) != `{"cost":[1,2]}` || doc.Tasks[1].Owner != "bob" {
				t.Fatalf("after two rewrites:\n%s", data)
			}
			shown, err := reopen(t, q).Show("b")
			if err != nil || string(shown.Extra["owner"]) != `"bob"` {
				t.Fatalf("show b: %+v %v", shown, err)
			}
			// Archived, the fields stay too.
			if _, err := q.Archive(0); err != nil {
				t.Fatal(err)
			}
			shown, err = reopen(t, q).Show("a")
			if err != nil || string(shown.Extra["owner"]) != `"ann"` {
				t.Fatalf("show archived a: %+v %v", shown, err)
			}
		})
	}
}

var benchTask = []byte(`{"id":"t-01JDXYZABCDEFGHJKMNPQRSTVW","title":"fix the flaky test in pkg/queue","prompt":"The test TestCrashProcesses fails one run in fifty; find out why and fix it.","status":"claimed","priority":2,"depends_on":["t-01JDXYZABCDEFGHJKMNPQRSTVA"],"labels":{"area":"queue"},"verify":"go test ./pkg/queue/...","attempts":1,"max_attempts":3,"claim":{"worker":"3","token":17,"until":"2026-11-22T10:00:00Z"},"result":null,"error":null,"created_at":"2026-11-22T09:00:00Z","updated_at":"2026-11-22T09:50:00Z"}`)

// The scan for fields this version does not know, next to the decoding it
// adds to: go test -bench DecodeTask ./pkg/queue
func BenchmarkUnmarshalTask(b *testing.B) {
	for b.Loop() {
		var t protocol.Task
		json.Unmarshal(benchTask, &t)
	}
}

func BenchmarkScanKeys(b *testing.B) {
	for b.Loop() {
		unknownFields(benchTask, taskKeys())
	}
}

func BenchmarkDecodeTask(b *testing.B) {
	for b.Loop() {
		var t protocol.Task
		decodeTask(benchTask, &t)
	}
}

// FuzzUnknownFields: for any JSON object, the members found unknown are
// exactly those encoding/json leaves out of a task, each with its value;
// written back after a task's own fields they give valid JSON, one line.
func FuzzUnknownFields(f *testing.F) {
	f.Add([]byte(`{ "id" : "a", "Status":"pending", "x\u0079":[1,{"}":"]"}], "note": "a \"quoted\" }", "n":-1.5e3 , "labels":{"k":"v"}}`))
	f.Add([]byte(`{"owner":"ann","meta":{"cost":[1,2]},"id":"a"}`))
	f.Add([]byte("{\n  \"a\": [\n    1\n  ]\n}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var all map[string]json.RawMessage
		if json.Unmarshal(in, &all) != nil || all == nil {
			return
		}
		got := unknownFields(in, taskKeys())
		for k, v := range got {
			if taskKeys()[strings.ToLower(k)] {
				t.Fatalf("known field %q reported unknown", k)
			}
			if !json.Valid(v) || bytes.ContainsAny(v, "\n\r") {
				t.Fatalf("field %q: value %q", k, v)
			}
		}
		for k := range all {
			if _, ok := got[k]; !ok && !taskKeys()[strings.ToLower(k)] {
				t.Fatalf("unknown field %q missed in %s (found %v)", k, in, got)
			}
		}
		out := withExtra([]byte(`{"id":"a"}`), got)
		if !json.Valid(out) || bytes.ContainsAny(out, "\n\r") {
			t.Fatalf("withExtra: %s", out)
		}
	})
}
