package queue

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// killing makes the next commits of q stop at point, as a process killed
// there would, until the returned func is called.
func killing(t *testing.T, q *Queue, point string) func() {
	t.Helper()
	q.Crash = func(p string) bool { return p == point }
	return func() { q.Crash = nil }
}

// ops lists the journal as "op task" strings.
func ops(t *testing.T, q *Queue) []string {
	t.Helper()
	var out []string
	for _, ev := range events(t, q) {
		out = append(out, ev.Op+" "+ev.Task)
	}
	return out
}

// killedClaim claims as a writer killed after replacing task-queue.json
// but before appending its events.
func killedClaim(t *testing.T, q *Queue) {
	t.Helper()
	resume := killing(t, q, "archived")
	defer resume()
	if _, err := q.Claim("w", time.Minute); !errors.Is(err, errCrashed) {
		t.Fatalf("claim: %v", err)
	}
}

// TestJournalAfterKill: a writer killed after replacing task-queue.json but
// before appending its events loses none of them: the next writer appends
// them, once, before its own.
func TestJournalAfterKill(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"})
	killedClaim(t, q)
	// The claim is committed: a reader sees it before the journal does.
	q2 := reopen(t, q)
	if got, _ := q2.Show("a"); got.Status != protocol.StatusClaimed {
		t.Fatalf("a after the killed claim: %+v", got)
	}
	if got := strings.Join(ops(t, q), ","); got != "add a,add b" {
		t.Fatalf("journal before the next change: %s", got)
	}
	// A change that finds nothing to do settles too.
	q3 := reopen(t, q)
	if _, err := q3.Complete("a", 9, nil); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale complete: %v", err)
	}
	if got := strings.Join(ops(t, q), ","); got != "add a,add b,claim a" {
		t.Fatalf("journal after the next change: %s", got)
	}
	b, err := reopen(t, q).Claim("w", time.Minute)
	if err != nil || b.ID != "b" {
		t.Fatalf("claim b: %v %+v", err, b)
	}
	if got := strings.Join(ops(t, q), ","); got != "add a,add b,claim a,claim b" {
		t.Fatalf("journal: %s", got)
	}
	checkFiles(t, q)
}

// TestSettleWhenQuiet: a follower of the journal (pg-queue watch) gets a
// killed writer's events without waiting for the next change: at its
// start, and once the queue has been quiet after a change it sees.
func TestSettleWhenQuiet(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"})
	killedClaim(t, q)
	watcher := reopen(t, q)
	// follow runs the watcher's settling until the returned stop.
	follow := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			watcher.SettleWhenQuiet(ctx, 20*time.Millisecond, func(err error) { t.Errorf("settle: %v", err) })
		}()
		return func() { cancel(); <-done }
	}
	stop := follow()
	waitOps := func(want string) {
		t.Helper()
		for i := 0; ; i++ {
			got := strings.Join(ops(t, q), ",")
			if got == want {
				return
			}
			if i == 500 {
				t.Fatalf("journal %s, want %s", got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitOps("add a,add b,claim a") // settled at the start
	// A second killed writer, while the follower runs.
	killedClaim(t, reopen(t, q))
	waitOps("add a,add b,claim a,claim b")
	stop()
	// Settled versions are not settled twice.
	if _, err := reopen(t, q).Release("b", 2); err != nil {
		t.Fatal(err)
	}
	if ok, err := reopen(t, q).Settle(); err != nil || !ok {
		t.Fatal(ok, err)
	}
	waitOps("add a,add b,claim a,claim b,release b")

	// While another process holds the team lock (a writer, or a person
	// editing by hand under flock), a settle does not wait for it: it
	// returns at once and is tried again, so watch --count, --for and
	// Ctrl-C never hang on the lock.
	killedClaim(t, reopen(t, q))
	lk := flock.New(q.Dir().Lock())
	if err := lk.Lock(); err != nil {
		t.Fatal(err)
	}
	if ok, err := reopen(t, q).Settle(); err != nil || ok {
		t.Fatalf("settle under a held lock: %v %v", ok, err)
	}
	stop = follow()
	time.Sleep(100 * time.Millisecond)
	if got := strings.Join(ops(t, q), ","); got != "add a,add b,claim a,claim b,release b" {
		t.Fatalf("journal changed under a held lock: %s", got)
	}
	lk.Unlock()
	waitOps("add a,add b,claim a,claim b,release b,claim b")
	stop()
	checkFiles(t, q)
}

// TestJournalTornAppend: a journal write cut short leaves a prefix of the
// change's lines and a fragment; the next writer blanks the fragment and
// appends only the lines that are missing.
func TestJournalTornAppend(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"})
	resume := killing(t, q, "archived")
	if _, err := q.Add([]protocol.Task{{ID: "b", Title: "b"}, {ID: "c", Title: "c"}, {ID: "d", Title: "d"}}); !errors.Is(err, errCrashed) {
		t.Fatalf("add: %v", err)
	}
	resume()
	// What the killed write got out: line b whole, line c cut short.
	data, _ := os.ReadFile(q.Dir().Queue())
	var doc struct {
		Journal pendingEvents `json:"journal"`
	}
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.Journal.Events) != 3 {
		t.Fatalf("pending events in the header: %v %+v", err, doc.Journal)
	}
	f, _ := os.OpenFile(q.Dir().Events(), os.O_WRONLY|os.O_APPEND, 0)
	f.Write(append(append([]byte{}, doc.Journal.Events[0]...), '\n'))
	f.Write(doc.Journal.Events[1][:20])
	f.Close()
	// Another tool appends meanwhile (and ends the fragment).
	if err := jsonl.Append(q.Dir().Events(), protocol.WorkerEvent{Type: protocol.JournalWorker, TS: time.Now().UTC(), Worker: "3", Op: "state", State: "idle"}); err != nil {
		t.Fatal(err)
	}
	if _, err := reopen(t, q).Claim("w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ops(t, q), ","); got != "add a,add b,state ,add c,add d,claim a" {
		t.Fatalf("journal: %s", got)
	}
	raw, _ := os.ReadFile(q.Dir().Events())
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if strings.TrimSpace(line) != "" && !json.Valid([]byte(line)) {
			t.Fatalf("torn line left in the journal: %q", line)
		}
	}
}

// TestPruneKilled: a prune killed after its commit but before the archive
// is replaced loses neither its events nor the rewrite; one killed before
// its commit changes nothing.
func TestPruneKilled(t *testing.T) {
	q, c := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"}, protocol.Task{ID: "d", Title: "d", DependsOn: []string{"a"}})
	for range 2 {
		got, _ := q.Claim("w", time.Minute)
		q.Complete(got.ID, got.Claim.Token, nil)
	}
	if n, err := q.Archive(0); err != nil || n != 2 {
		t.Fatalf("archive: %d %v", n, err)
	}
	c.add(time.Hour)
	archive := filepath.Join(q.Dir().Path(), ArchiveFile)
	before, _ := os.ReadFile(archive)
	// Killed before its commit: nothing changed but a stray file, which
	// a later writer removes.
	resume := killing(t, q, "prepared")
	if _, err := q.Prune(0); !errors.Is(err, errCrashed) {
		t.Fatalf("prune: %v", err)
	}
	resume()
	if got, _ := os.ReadFile(archive); string(got) != string(before) {
		t.Fatal("archive changed by a prune killed before its commit")
	}
	if st, _ := reopen(t, q).Stats(); st.Archived != 2 {
		t.Fatalf("stats after a killed prune: %+v", st)
	}

	resume = killing(t, q, "committed")
	if _, err := q.Prune(0); !errors.Is(err, errCrashed) {
		t.Fatalf("prune: %v", err)
	}
	resume()
	if got, _ := os.ReadFile(archive); string(got) != string(before) {
		t.Fatal("archive replaced before the settle")
	}
	// The next writer finishes the prune.
	q2 := reopen(t, q)
	if _, err := q2.Claim("w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(archive); len(got) != 0 {
		t.Fatalf("archive after the settle: %q", got)
	}
	if _, err := q2.Show("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pruned task: %v", err)
	}
	var pruned []string
	for _, op := range ops(t, q) {
		if strings.HasPrefix(op, "prune ") {
			pruned = append(pruned, op)
		}
	}
	if strings.Join(pruned, ",") != "prune a,prune b" {
		t.Fatalf("prune events: %v", pruned)
	}
	st, _ := q2.Stats()
	if st.Archived != 0 || st.Done != 0 || st.Claimed != 1 {
		t.Fatalf("stats: %+v", st)
	}
	if m, _ := filepath.Glob(filepath.Join(q.Dir().Path(), "."+ArchiveFile+".next-*")); len(m) != 0 {
		t.Fatalf("left behind: %v", m)
	}
	checkFiles(t, q)
}

// writeQueue replaces task-queue.json by hand, as an editor or jq would,
// and drops the index.
func writeQueue(t *testing.T, q *Queue, doc string) {
	t.Helper()
	if err := os.WriteFile(q.Dir().Queue(), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(q.Dir().Path(), IndexFile))
}

// TestHeaderlessQueue: `jq '{tasks: .tasks}'` drops the header. Tokens
// must still never be given twice (a released task's token is only in the
// journal), and the archived counts and the status of archived
// dependencies come back from the archive.
func TestHeaderlessQueue(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"},
		protocol.Task{ID: "c", Title: "c", DependsOn: []string{"a"}})
	a, _ := q.Claim("w", time.Minute)
	q.Complete("a", a.Claim.Token, nil)
	if n, err := q.Archive(0); err != nil || n != 1 {
		t.Fatalf("archive: %d %v", n, err)
	}
	for range 3 { // tokens 2..4, all released: no task holds them now
		b, _ := q.Claim("w", time.Minute)
		if _, err := q.Release(b.ID, b.Claim.Token); err != nil {
			t.Fatal(err)
		}
	}
	live, _ := q.List(ListOptions{})
	var doc struct {
		Tasks []protocol.Task `json:"tasks"`
	}
	doc.Tasks = live
	b, _ := json.Marshal(doc)
	writeQueue(t, q, string(b))

	q2 := reopen(t, q)
	st, err := q2.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Archived != 1 || st.Done != 1 || st.Claimable != 2 || st.Blocked != 0 {
		t.Fatalf("stats of a headerless queue: %+v", st)
	}
	got, err := q2.Claim("w", time.Minute)
	if err != nil || got.Claim.Token != 5 {
		t.Fatalf("claim after the header was lost: %v %+v", err, got)
	}
	checkFiles(t, q)
}

// TestHandWrittenQueue: a task added by hand gets the defaults of Add; a
// file with a duplicate id or that jq would refuse is an error, not a
// guess.
func TestHandWrittenQueue(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"})
	data, _ := os.ReadFile(q.Dir().Queue())
	own := string(data)

	// A task appended by hand in the queue's own layout, with only an id
	// and a title (and a status that is not given).
	hand := strings.Replace(own, "\n]}", ",\n"+`{"id":"h","title":"by hand","priority":5}`+"\n]}", 1)
	writeQueue(t, q, hand)
	h, err := reopen(t, q).Claim("w", time.Minute)
	if err != nil || h.ID != "h" || h.MaxAttempts != DefaultMaxAttempts || h.Attempts != 1 || h.CreatedAt.IsZero() ||
		h.Labels == nil || h.DependsOn == nil {
		t.Fatalf("claim of a hand-added task: %v %+v", err, h)
	}
	checkFiles(t, q)

	// A bare list of tasks, as the seed system kept it.
	writeQueue(t, q, `[{"id":"s1","title":"seed"},{"id":"s2","title":"seed 2","depends_on":["s1"]}]`)
	if st, err := reopen(t, q).Stats(); err != nil || st.Live != 2 || st.Blocked != 1 {
		t.Fatalf("stats of a bare list: %v %+v", err, st)
	}

	bad := []struct{ name, doc, msg string }{
		{"duplicate", strings.Replace(own, "\n]}", ",\n"+`{"id":"a","title":"again"}`+"\n]}", 1), "duplicate task id a"},
		{"duplicate in a document", `{"tasks":[{"id":"x","title":"x"},{"id":"x","title":"y"}]}`, "duplicate task id x"},
		{"missing comma", strings.Replace(own, "\n]}", "\n"+`{"id":"h","title":"h"}`+"\n]}", 1), "not a valid queue document"},
		{"trailing comma", strings.Replace(own, "\n]}", ",\n]}", 1), "not a valid queue document"},
		{"unknown status", `{"tasks":[{"id":"x","title":"x","status":"later"}]}`, `unknown status "later"`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			writeQueue(t, q, tc.doc)
			for name, fn := range map[string]func(*Queue) error{
				"claim": func(q *Queue) error { _, err := q.Claim("w", time.Minute); return err },
				"stats": func(q *Queue) error { _, err := q.Stats(); return err },
			} {
				if err := fn(reopen(t, q)); err == nil || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("%s: %v, want %q", name, err, tc.msg)
				}
			}
			if got, _ := os.ReadFile(q.Dir().Queue()); string(got) != tc.doc {
				t.Fatal("a refused file was changed")
			}
		})
	}
}

// TestArchiveKilled: an archive killed after appending to
// task-archive.jsonl but before its commit leaves the tasks live and in
// the archive; nothing counts them twice, and a prune deletes each once.
func TestArchiveKilled(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"}, protocol.Task{ID: "c", Title: "c"})
	for range 3 {
		got, _ := q.Claim("w", time.Minute)
		q.Complete(got.ID, got.Claim.Token, nil)
	}
	resume := killing(t, q, "prepared")
	if _, err := q.Archive(0); !errors.Is(err, errCrashed) {
		t.Fatalf("archive: %v", err)
	}
	resume()
	q = reopen(t, q)
	all, _ := q.List(ListOptions{Archived: true})
	st, _ := q.Stats()
	if len(all) != 3 || st.Live != 3 || st.Archived != 0 || st.Done != 3 {
		t.Fatalf("after a killed archive: %d tasks, %+v", len(all), st)
	}
	// Archived again for real: each is in the archive twice now.
	if _, err := q.Archive(0); err != nil {
		t.Fatal(err)
	}
	if st, _ := q.Stats(); st.Live != 0 || st.Archived != 3 || st.Done != 3 {
		t.Fatalf("after the archive: %+v", st)
	}
	if n, err := q.Prune(0); err != nil || n != 3 {
		t.Fatalf("prune: %d %v", n, err)
	}
	if st, _ := q.Stats(); st.Archived != 0 || st.Done != 0 {
		t.Fatalf("after the prune: %+v", st)
	}
	count := map[string]int{}
	for _, ev := range events(t, q) {
		count[ev.Op+" "+ev.Task]++
	}
	for _, id := range []string{"a", "b", "c"} {
		if count["archive "+id] != 1 || count["prune "+id] != 1 {
			t.Fatalf("journal: %v", count)
		}
	}

	// Killed again, then pruned while the tasks are still live.
	add(t, q, protocol.Task{ID: "d", Title: "d"})
	d, _ := q.Claim("w", time.Minute)
	q.Complete("d", d.Claim.Token, nil)
	resume = killing(t, q, "prepared")
	q.Archive(0)
	resume()
	if n, err := reopen(t, q).Prune(0); err != nil || n != 1 {
		t.Fatalf("prune of a live task also in the archive: %d %v", n, err)
	}
	if b, _ := os.ReadFile(filepath.Join(q.Dir().Path(), ArchiveFile)); len(b) != 0 {
		t.Fatalf("archive: %q", b)
	}
}

// TestCrashIsPerQueue: the crash test's hook belongs to one handle (it was
// a package-level variable every queue of the process obeyed), so a test
// that stops one queue's changes cannot stop another's, and a handle made
// without it, as every production handle is, never stops.
func TestCrashIsPerQueue(t *testing.T) {
	q, _ := open(t)
	killing(t, q, "prepared")
	other, _ := open(t)
	if _, err := other.Add([]protocol.Task{{ID: "a", Title: "a"}}); err != nil {
		t.Fatalf("a queue without the hook: %v", err)
	}
	if _, err := q.Add([]protocol.Task{{ID: "a", Title: "a"}}); !errors.Is(err, errCrashed) {
		t.Fatalf("the queue with the hook: %v, want the crash", err)
	}
	if _, err := reopen(t, q).Add([]protocol.Task{{ID: "a", Title: "a"}}); err != nil {
		t.Fatalf("another handle on the same team: %v", err)
	}
}
