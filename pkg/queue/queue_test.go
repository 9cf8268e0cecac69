package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/protocol/validate"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func open(t *testing.T) (*Queue, *clock) {
	t.Helper()
	dir, err := teamdir.New(t.TempDir(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	q, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	q.Now = c.now
	return q, c
}

// reopen is another handle on the same team, as another process would have.
func reopen(t *testing.T, q *Queue) *Queue {
	t.Helper()
	q2, err := Open(q.Dir())
	if err != nil {
		t.Fatal(err)
	}
	q2.Now, q2.KeepFinished = q.Now, q.KeepFinished
	return q2
}

func add(t *testing.T, q *Queue, tasks ...protocol.Task) []protocol.Task {
	t.Helper()
	out, err := q.Add(tasks)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkFiles validates task-queue.json (a JSON document whose tasks match
// the task schema) and events.jsonl (journal events).
func checkFiles(t *testing.T, q *Queue) {
	t.Helper()
	data, err := os.ReadFile(q.Dir().Queue())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("task-queue.json: %v\n%s", err, data)
	}
	for _, raw := range doc.Tasks {
		if err := validate.JSON("task", raw); err != nil {
			t.Fatalf("task %s: %v", raw, err)
		}
	}
	ev, err := os.ReadFile(q.Dir().Events())
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Lines("journal-event", ev); err != nil {
		t.Fatalf("events.jsonl: %v", err)
	}
}

func events(t *testing.T, q *Queue) []protocol.TaskEvent {
	t.Helper()
	data, err := os.ReadFile(q.Dir().Events())
	if err != nil {
		t.Fatal(err)
	}
	var out []protocol.TaskEvent
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.TrimSpace(line) == "" {
			continue // a torn line blanked by the repair
		}
		var ev protocol.TaskEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func TestClaimOrderAndCycle(t *testing.T) {
	q, c := open(t)
	add(t, q, protocol.Task{ID: "low", Title: "low"})
	c.add(time.Second)
	add(t, q, protocol.Task{ID: "high-new", Title: "h2", Priority: 5}, protocol.Task{ID: "high-old-later", Title: "h3", Priority: 5})
	c.add(time.Second)
	add(t, q, protocol.Task{ID: "high", Title: "h", Priority: 5})
	want := []string{"high-new", "high-old-later", "high", "low"}
	var lastTok int64
	for _, id := range want {
		got, err := q.Claim("w1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != id || got.Status != protocol.StatusClaimed || got.Attempts != 1 || got.Claim.Worker != "w1" {
			t.Fatalf("claimed %+v, want %s", got, id)
		}
		if got.Claim.Token <= lastTok {
			t.Fatalf("token %d not increasing after %d", got.Claim.Token, lastTok)
		}
		lastTok = got.Claim.Token
	}
	if _, err := q.Claim("w1", time.Minute); !errors.Is(err, ErrNothing) {
		t.Fatalf("claim on an empty queue: %v", err)
	}
	checkFiles(t, q)
	evs := events(t, q)
	if len(evs) != 8 || evs[0].Op != "add" || evs[7].Op != "claim" || evs[7].Task != "low" || evs[7].Token != lastTok {
		t.Fatalf("events: %+v", evs)
	}
}

func TestAddValidation(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"})
	cases := []struct {
		name  string
		tasks []protocol.Task
		index int
		msg   string
	}{
		{"no title", []protocol.Task{{ID: "x"}}, 0, "needs a title"},
		{"bad id", []protocol.Task{{ID: "../x", Title: "x"}}, 0, "invalid task id"},
		{"dup live", []protocol.Task{{ID: "b", Title: "b"}, {ID: "a", Title: "a"}}, 1, "already exists"},
		{"dup batch", []protocol.Task{{ID: "b", Title: "b"}, {ID: "b", Title: "b"}}, 1, "appears twice"},
		{"unknown dep", []protocol.Task{{ID: "b", Title: "b", DependsOn: []string{"nope"}}}, 0, "unknown task nope"},
		{"self", []protocol.Task{{ID: "b", Title: "b", DependsOn: []string{"b"}}}, 0, "depends on itself"},
		{"cycle", []protocol.Task{
			{ID: "b", Title: "b", DependsOn: []string{"c"}},
			{ID: "c", Title: "c", DependsOn: []string{"d", "a"}},
			{ID: "d", Title: "d", DependsOn: []string{"b"}},
		}, 0, "dependency cycle: b -> c -> d -> b"},
		{"max attempts", []protocol.Task{{Title: "b", MaxAttempts: -1}}, 0, "max_attempts"},
	}
	before, _ := os.ReadFile(q.Dir().Queue())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := q.Add(tc.tasks)
			var ie *InputError
			if !errors.As(err, &ie) || ie.Index != tc.index || !strings.Contains(ie.Msg, tc.msg) {
				t.Fatalf("got %v (%+v), want input error at %d with %q", err, ie, tc.index, tc.msg)
			}
		})
	}
	after, _ := os.ReadFile(q.Dir().Queue())
	if string(before) != string(after) {
		t.Fatal("a rejected add changed task-queue.json")
	}
	if n := len(events(t, q)); n != 1 {
		t.Fatalf("%d events after rejected adds, want 1", n)
	}
	// A valid batch with in-batch dependencies, defaults filled in.
	out := add(t, q, protocol.Task{Prompt: "first line\nmore", DependsOn: []string{"a", "a"}}, protocol.Task{ID: "z", Title: "z", DependsOn: []string{"a"}})
	if !strings.HasPrefix(out[0].ID, "t-") || len(out[0].ID) != 28 || out[0].Title != "first line" || out[0].MaxAttempts != 3 ||
		len(out[0].DependsOn) != 1 || out[0].Labels == nil {
		t.Fatalf("defaults: %+v", out[0])
	}
	checkFiles(t, q)
}

func TestDependencies(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b", DependsOn: []string{"a"}, Priority: 9},
		protocol.Task{ID: "c", Title: "c", DependsOn: []string{"b"}})
	ls, err := q.List(ListOptions{Status: []string{"blocked"}})
	if err != nil || len(ls) != 2 || !ls[0].Blocked {
		t.Fatalf("blocked list: %v %+v", err, ls)
	}
	a, err := q.Claim("w", time.Minute)
	if err != nil || a.ID != "a" {
		t.Fatalf("claim: %v %+v", err, a)
	}
	if _, err := q.Claim("w", time.Minute); !errors.Is(err, ErrNothing) {
		t.Fatalf("b claimable before a is done: %v", err)
	}
	if _, err := q.Complete("a", a.Claim.Token, json.RawMessage(`{"ok": true}`)); err != nil {
		t.Fatal(err)
	}
	b, err := q.Claim("w", time.Minute)
	if err != nil || b.ID != "b" {
		t.Fatalf("claim b: %v %+v", err, b)
	}
	if _, err := q.Fail("b", b.Claim.Token, "boom", false); err != nil {
		t.Fatal(err)
	}
	st, err := q.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Done != 1 || st.Failed != 1 || st.Pending != 1 || st.Blocked != 1 || st.Stuck != 1 || !st.Drained || st.Claimable != 0 {
		t.Fatalf("stats: %+v", st)
	}
	show, err := q.Show("a")
	if err != nil || string(show.Result) != `{"ok":true}` {
		t.Fatalf("show: %v %s", err, show.Result)
	}
	checkFiles(t, q)
}

func TestFencing(t *testing.T) {
	q, c := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a", MaxAttempts: 2})
	first, _ := q.Claim("w1", time.Minute)
	c.add(2 * time.Minute) // w1's lease expires
	second, err := q.Claim("w2", time.Minute)
	if err != nil || second.Attempts != 2 || second.Claim.Token == first.Claim.Token {
		t.Fatalf("reclaim: %v %+v", err, second)
	}
	before, _ := os.ReadFile(q.Dir().Queue())
	for name, fn := range map[string]func() error{
		"complete": func() error { _, err := q.Complete("a", first.Claim.Token, nil); return err },
		"fail":     func() error { _, err := q.Fail("a", first.Claim.Token, "x", true); return err },
		"renew":    func() error { _, err := q.Renew("a", first.Claim.Token, time.Hour); return err },
		"release":  func() error { _, err := q.Release("a", first.Claim.Token); return err },
	} {
		err := fn()
		if !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "worker w2 holds it") {
			t.Fatalf("%s with a stale token: %v", name, err)
		}
	}
	after, _ := os.ReadFile(q.Dir().Queue())
	if string(before) != string(after) {
		t.Fatal("stale calls changed the queue")
	}
	if _, err := q.Complete("missing", 1, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	done, err := q.Complete("a", second.Claim.Token, json.RawMessage(`"r"`))
	if err != nil || done.Status != protocol.StatusDone {
		t.Fatal(err)
	}
	n := len(events(t, q))
	again, err := q.Complete("a", second.Claim.Token, json.RawMessage(`"other"`))
	if err != nil || string(again.Result) != `"r"` || len(events(t, q)) != n {
		t.Fatalf("repeated complete: %v %+v", err, again)
	}
	if _, err := q.Complete("a", first.Claim.Token, nil); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale complete of a done task: %v", err)
	}
	evs := events(t, q)
	var ops []string
	for _, e := range evs {
		ops = append(ops, e.Op)
	}
	if got := strings.Join(ops, ","); got != "add,claim,expire,claim,complete" {
		t.Fatalf("ops %s", got)
	}
	checkFiles(t, q)
}

func TestExpiryExhaustsAttempts(t *testing.T) {
	q, c := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a", MaxAttempts: 2}, protocol.Task{ID: "b", Title: "b", Priority: -1})
	for i := 0; i < 2; i++ {
		got, err := q.Claim("w", time.Minute)
		if err != nil || got.ID != "a" || got.Attempts != i+1 {
			t.Fatalf("claim %d: %v %+v", i, err, got)
		}
		c.add(time.Hour)
	}
	got, err := q.Claim("w", time.Minute)
	if err != nil || got.ID != "b" {
		t.Fatalf("after exhaustion: %v %+v", err, got)
	}
	a, _ := q.Show("a")
	if a.Status != protocol.StatusFailed || a.Error == nil || !strings.Contains(*a.Error, "after attempt 2 of 2") {
		t.Fatalf("exhausted task: %+v", a)
	}
	// Renewing keeps a lease alive past its first expiry.
	c.add(50 * time.Second)
	if _, err := q.Renew("b", got.Claim.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	c.add(50 * time.Second)
	if _, err := q.Claim("w2", time.Minute); !errors.Is(err, ErrNothing) {
		t.Fatalf("renewed task claimed: %v", err)
	}
	checkFiles(t, q)
}

func TestFailRetryReleaseCancel(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a", MaxAttempts: 2})
	a, _ := q.Claim("w", 0)
	if a.Claim.Until.Sub(q.now()) != DefaultLease {
		t.Fatalf("default lease: %v", a.Claim.Until)
	}
	r, err := q.Fail("a", a.Claim.Token, "flaky", true)
	if err != nil || r.Status != protocol.StatusPending || r.Claim != nil || *r.Error != "flaky" {
		t.Fatalf("retry: %v %+v", err, r)
	}
	a, _ = q.Claim("w", time.Minute)
	r, err = q.Fail("a", a.Claim.Token, "flaky again", true)
	if err != nil || r.Status != protocol.StatusFailed {
		t.Fatalf("retry past max: %v %+v", err, r)
	}
	add(t, q, protocol.Task{ID: "b", Title: "b"}, protocol.Task{ID: "c", Title: "c"})
	b, _ := q.Claim("w9", time.Minute)
	rel, err := q.Release("b", b.Claim.Token)
	if err != nil || rel.Status != protocol.StatusPending || rel.Attempts != 1 {
		t.Fatalf("release: %v %+v", err, rel)
	}
	q.Claim("w9", time.Minute)
	q.Claim("w9", time.Minute)
	st, _ := q.Stats()
	mark := st.NextToken // the supervisor notes it when w9 stops
	q.Release("c", 5)
	restarted, _ := q.Claim("w9", time.Minute) // w9 restarted and claimed c again
	rs, err := q.ReleaseWorker("w9", "worker died", mark)
	if err != nil || len(rs) != 1 || rs[0].ID != "b" {
		t.Fatalf("release worker before token %d: %v %+v", mark, err, rs)
	}
	if got, _ := q.Show(restarted.ID); got.Status != protocol.StatusClaimed || got.Claim.Token != restarted.Claim.Token {
		t.Fatalf("the restarted worker lost its claim: %+v", got)
	}
	rs, err = q.ReleaseWorker("w9", "worker died", 0)
	if err != nil || len(rs) != 1 || rs[0].ID != "c" {
		t.Fatalf("release worker: %v %+v", err, rs)
	}
	cl, _ := q.Claim("w1", time.Minute)
	cc, err := q.Cancel(cl.ID, "not needed")
	if err != nil || cc.Status != protocol.StatusCancelled {
		t.Fatal(err)
	}
	if _, err := q.Complete(cl.ID, cl.Claim.Token, nil); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("complete after cancel: %v", err)
	}
	if _, err := q.Cancel(cl.ID, ""); err != nil {
		t.Fatalf("cancel twice: %v", err)
	}
	if _, err := q.Cancel("a", ""); !errors.Is(err, ErrFinished) {
		t.Fatalf("cancel failed task: %v", err)
	}
	if _, err := q.Cancel("zz", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
	checkFiles(t, q)
}

func TestAutoArchiveAndArchivedDeps(t *testing.T) {
	q, c := open(t)
	q.KeepFinished = 4
	q.NoSync = true // the unsynced path writes the same files
	var in []protocol.Task
	for i := 0; i < 10; i++ {
		in = append(in, protocol.Task{ID: fmt.Sprintf("t%d", i), Title: "x"})
	}
	add(t, q, in...)
	add(t, q, protocol.Task{ID: "dep", Title: "needs t0", DependsOn: []string{"t0"}, Priority: -5})
	for i := 0; i < 10; i++ {
		c.add(time.Second)
		got, err := q.Claim("w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Complete(got.ID, got.Claim.Token, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Completing t0 again after it was archived is still a harmless success.
	if got, err := q.Complete("t0", 1, nil); err != nil || got.Status != protocol.StatusDone {
		t.Fatalf("repeat complete of an archived task: %v %+v", err, got)
	}
	if _, err := q.Complete("t0", 2, nil); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("stale complete of an archived task: %v", err)
	}
	st, _ := q.Stats()
	if st.Live > 5 || st.Done != 10 || st.Archived < 6 || st.Claimable != 1 {
		t.Fatalf("stats after auto-archive: %+v", st)
	}
	// t0 is archived, and dep still sees it done.
	got, err := q.Claim("w", time.Minute)
	if err != nil || got.ID != "dep" {
		t.Fatalf("claim dep: %v %+v", err, got)
	}
	// Adding a task that depends on an archived task; a reused archived id is refused.
	add(t, q, protocol.Task{ID: "late", Title: "late", DependsOn: []string{"t1"}})
	if _, err := q.Add([]protocol.Task{{ID: "t1", Title: "again"}}); err == nil || !strings.Contains(err.Error(), "archived") {
		t.Fatalf("reused archived id: %v", err)
	}
	t1, err := q.Show("t1")
	if err != nil || t1.Status != protocol.StatusDone {
		t.Fatalf("show archived: %v %+v", err, t1)
	}
	all, _ := q.List(ListOptions{Archived: true})
	if len(all) != 12 {
		t.Fatalf("list --archived: %d tasks", len(all))
	}
	n, err := q.Archive(0)
	if err != nil || n == 0 {
		t.Fatalf("archive: %d %v", n, err)
	}
	live, _ := q.List(ListOptions{})
	if len(live) != 2 {
		t.Fatalf("live after archive: %+v", live)
	}
	pr, err := q.Prune(0)
	if err != nil || pr != 10 {
		t.Fatalf("prune: %d %v", pr, err)
	}
	if _, err := q.Show("t5"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pruned task still shown: %v", err)
	}
	// late depends on the pruned t1: its status is kept.
	if _, err := q.Complete("dep", got.Claim.Token, nil); err != nil {
		t.Fatal(err)
	}
	l, err := q.Claim("w", time.Minute)
	if err != nil || l.ID != "late" {
		t.Fatalf("claim late: %v %+v", err, l)
	}
	checkFiles(t, q)
	arch, _ := os.ReadFile(filepath.Join(q.Dir().Path(), ArchiveFile))
	if err := validate.Lines("task", arch); err != nil && len(arch) > 0 {
		t.Fatal(err)
	}
}

func TestIndexRebuildAndForeignLayout(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a", Priority: 1}, protocol.Task{ID: "b", Title: "b"})
	idx := filepath.Join(q.Dir().Path(), IndexFile)
	// A stale index (from an older generation) is not trusted.
	old, _ := os.ReadFile(idx)
	add(t, q, protocol.Task{ID: "c", Title: "c", Priority: 2})
	os.WriteFile(idx, old, 0o644)
	got, err := reopen(t, q).Claim("w", time.Minute)
	if err != nil || got.ID != "c" {
		t.Fatalf("stale index: %v %+v", err, got)
	}
	// A corrupt index is rebuilt.
	os.WriteFile(idx, []byte("PGQIDX1\ngarbage"), 0o644)
	got, err = reopen(t, q).Claim("w", time.Minute)
	if err != nil || got.ID != "a" {
		t.Fatalf("corrupt index: %v %+v", err, got)
	}
	// A queue rewritten by jq (pretty-printed) still reads.
	data, _ := os.ReadFile(q.Dir().Queue())
	var v any
	json.Unmarshal(data, &v)
	pretty, _ := json.MarshalIndent(v, "", "  ")
	os.WriteFile(q.Dir().Queue(), pretty, 0o644)
	q3 := reopen(t, q)
	got, err = q3.Claim("w", time.Minute)
	if err != nil || got.ID != "b" || got.Claim.Token != 3 {
		t.Fatalf("pretty file: %v %+v", err, got)
	}
	first, _ := os.ReadFile(q.Dir().Queue())
	if !strings.HasPrefix(string(first), `{"type":"task-queue"`) || strings.Count(string(first), "\n") != 5 {
		t.Fatalf("queue not rewritten in its own layout:\n%s", first)
	}
	checkFiles(t, q)
}

// TestConcurrentHandles races many handles (each as a separate process
// would be) through claim→complete: every task is done exactly once.
func TestConcurrentHandles(t *testing.T) {
	q, _ := open(t)
	q.Now = time.Now
	var in []protocol.Task
	for i := 0; i < 200; i++ {
		in = append(in, protocol.Task{Title: fmt.Sprint(i)})
	}
	add(t, q, in...)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := Open(q.Dir())
			if err != nil {
				t.Error(err)
				return
			}
			for {
				got, err := h.Claim(fmt.Sprint("w", w), time.Minute)
				if errors.Is(err, ErrNothing) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := h.Complete(got.ID, got.Claim.Token, nil); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[got.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 200 {
		t.Fatalf("%d tasks done, want 200", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("task %s done %d times", id, n)
		}
	}
	checkFiles(t, q)
}

func benchQueue(b *testing.B, live int, sync bool) {
	dir, _ := teamdir.New(b.TempDir(), "bench")
	q, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	q.NoSync = !sync
	in := make([]protocol.Task, live)
	for i := range in {
		in[i] = protocol.Task{Title: fmt.Sprintf("task %d", i), Prompt: "do the thing described in the issue and make the tests pass", Labels: map[string]string{"area": "bench"}}
	}
	if _, err := q.Add(in); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A fresh handle per call, as a fresh process would have.
		h, _ := Open(dir)
		h.NoSync = !sync
		t, err := h.Claim("w", time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		h, _ = Open(dir)
		h.NoSync = !sync
		if _, err := h.Complete(t.ID, t.Claim.Token, nil); err != nil {
			b.Fatal(err)
		}
		if i%500 == 499 { // keep the live count steady
			b.StopTimer()
			q.Add(in[:500:500])
			b.StartTimer()
		}
	}
}

func BenchmarkClaimComplete1k(b *testing.B)  { benchQueue(b, 1000, true) }
func BenchmarkClaimComplete10k(b *testing.B) { benchQueue(b, 10000, true) }

// Without fsync: the work of the process itself.
func BenchmarkClaimComplete1kNoSync(b *testing.B)  { benchQueue(b, 1000, false) }
func BenchmarkClaimComplete10kNoSync(b *testing.B) { benchQueue(b, 10000, false) }

func TestSweepTemps(t *testing.T) {
	q, _ := open(t)
	junk := filepath.Join(q.Dir().Path(), ".task-queue.json.tmp-123")
	os.WriteFile(junk, []byte("{"), 0o644)
	for i := 0; i < 100; i++ {
		add(t, q, protocol.Task{Title: "x"})
	}
	if _, err := os.Stat(junk); !os.IsNotExist(err) {
		t.Fatalf("temporary file left after 100 changes: %v", err)
	}
}

// TestReusedPrunedDependencyID: the id of a pruned task that a live task
// still depends on cannot be reused; a reuse would make the live task
// depend on the new task, and a new task depending on it would close a
// cycle that blocks both forever.
func TestReusedPrunedDependencyID(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"})
	a, _ := q.Claim("w", time.Minute)
	if _, err := q.Complete("a", a.Claim.Token, nil); err != nil {
		t.Fatal(err)
	}
	add(t, q, protocol.Task{ID: "d", Title: "d", DependsOn: []string{"a"}})
	if n, err := q.Prune(0); err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
	_, err := q.Add([]protocol.Task{{ID: "a", Title: "x", DependsOn: []string{"d"}}})
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(ie.Msg, "task a already exists") {
		t.Fatalf("reused id of a pruned dependency: %v", err)
	}
	d, err := q.Claim("w", time.Minute)
	if err != nil || d.ID != "d" {
		t.Fatalf("claim d: %v %+v", err, d)
	}
	// An id pruned with nothing depending on it is forgotten and free.
	add(t, q, protocol.Task{ID: "e", Title: "e"})
	e, _ := q.Claim("w", time.Minute)
	for _, c := range []*protocol.Task{d, e} {
		if _, err := q.Complete(c.ID, c.Claim.Token, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Prune(0); err != nil {
		t.Fatal(err)
	}
	add(t, q, protocol.Task{ID: "e", Title: "e again"}, protocol.Task{ID: "a", Title: "a again"})
	checkFiles(t, q)
}

// TestCancelAllOrNothing: one unknown or finished id among several cancels
// none of them.
func TestCancelAllOrNothing(t *testing.T) {
	q, _ := open(t)
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"}, protocol.Task{ID: "done", Title: "d", Priority: 9})
	d, _ := q.Claim("w", time.Minute)
	q.Complete(d.ID, d.Claim.Token, nil)
	before, _ := os.ReadFile(q.Dir().Queue())
	if _, err := q.CancelAll([]string{"a", "nope", "b"}, ""); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("cancel with an unknown id: %v", err)
	}
	if _, err := q.CancelAll([]string{"a", "done"}, ""); !errors.Is(err, ErrFinished) {
		t.Fatalf("cancel with a done task: %v", err)
	}
	if after, _ := os.ReadFile(q.Dir().Queue()); string(after) != string(before) {
		t.Fatal("a refused cancel changed the queue")
	}
	ts, err := q.CancelAll([]string{"b", "a", "b"}, "x")
	if err != nil || len(ts) != 3 || ts[0].ID != "b" || ts[1].ID != "a" || ts[2].Status != protocol.StatusCancelled {
		t.Fatalf("cancel: %v %+v", err, ts)
	}
	if got := strings.Join(ops(t, q), ","); got != "add a,add b,add done,claim done,complete done,cancel b,cancel a" {
		t.Fatalf("journal: %s", got)
	}
}
