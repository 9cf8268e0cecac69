package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
)

func contextWithCancelAfter(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), d)
}

// records reads the whole journal: every record appended before the call.
// It appends an end mark of its own and reads up to it, so a follower that
// is slow to deliver (a loaded machine, a server) loses nothing; the marks
// are left out of what it returns. idle bounds the wait for each record.
func records(t *testing.T, j store.Journal, idle time.Duration) [][]byte {
	t.Helper()
	mark := endMark{Type: endMarkType, N: endMarks.Add(1)}
	if err := j.Append(t.Context(), mark); err != nil {
		t.Fatalf("append the end mark: %v", err)
	}
	f, err := j.Follow(t.Context(), true)
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	defer f.Close()
	var out [][]byte
	for {
		ctx, cancel := context.WithTimeout(t.Context(), idle)
		b, err := f.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("next, after %d records: %v", len(out), err)
		}
		var m endMark
		if json.Unmarshal(b, &m) == nil && m.Type == endMarkType {
			if m.N == mark.N {
				return out
			}
			continue
		}
		out = append(out, b)
	}
}

// endMark is the record that records reads up to.
type endMark struct {
	Type string `json:"type"`
	N    int64  `json:"n"`
}

const endMarkType = "storetest_end"

var endMarks atomic.Int64

// taskEvents are the task events of the team's journal, in order.
func taskEvents(t *testing.T, e *env) []protocol.TaskEvent {
	t.Helper()
	var out []protocol.TaskEvent
	for _, b := range records(t, e.team.Journal(), time.Minute) {
		var ev protocol.TaskEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatalf("journal record %s: %v", b, err)
		}
		if ev.Type == protocol.JournalTask {
			out = append(out, ev)
		}
	}
	return out
}

// Changes and appended records come out of the journal in the order they
// happened, each one line of JSON.
func testJournalOrder(t *testing.T, e *env) {
	q := e.tasks()
	j := e.team.Journal()
	ctx := t.Context()
	add(t, q, protocol.Task{ID: "a", Title: "a"})
	if err := j.Append(ctx, protocol.WorkerEvent{Type: "worker", TS: time.Now().UTC(), Worker: "1", Op: "start", PID: 42}); err != nil {
		t.Fatal(err)
	}
	tk := claim(t, q, "1", time.Minute)
	if err := j.Append(ctx, map[string]any{"type": "monitor", "n": 1}, map[string]any{"type": "monitor", "n": 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Complete("a", tk.Claim.Token, nil); err != nil {
		t.Fatal(err)
	}
	recs := records(t, j, time.Minute)
	var got []string
	for _, b := range recs {
		var head struct {
			Type, Op string
			N        int
		}
		if err := json.Unmarshal(b, &head); err != nil {
			t.Fatalf("record %q: %v", b, err)
		}
		for _, c := range b {
			if c == '\n' {
				t.Fatalf("record %q holds a newline", b)
			}
		}
		got = append(got, fmt.Sprintf("%s/%s%d", head.Type, head.Op, head.N))
	}
	want := "[task/add0 worker/start0 task/claim0 monitor/1 monitor/2 task/complete0]"
	if fmt.Sprint(got) != want {
		t.Fatalf("journal\n got %v\nwant %s", got, want)
	}
	// Following from now sees only what comes after.
	f, err := j.Follow(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := j.Append(ctx, map[string]any{"type": "monitor", "n": 3}); err != nil {
		t.Fatal(err)
	}
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := f.Next(nctx)
	if err != nil || string(b) != `{"n":3,"type":"monitor"}` {
		t.Fatalf("follow from now: %q %v", b, err)
	}
	// A context that ends ends a waiting Next.
	cctx, ccancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer ccancel()
	if b, err := f.Next(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("next past the end: %q %v", b, err)
	}
}

// follow reads n records with a deadline.
func follow(t *testing.T, f store.Follower, n int, d time.Duration) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var out [][]byte
	for len(out) < n {
		b, err := f.Next(ctx)
		if err != nil {
			t.Fatalf("after %d of %d records: %v", len(out), n, err)
		}
		out = append(out, b)
	}
	return out
}

type seqRec struct {
	Type   string `json:"type"`
	Writer int    `json:"writer"`
	N      int    `json:"n"`
}

// checkStreams checks that records of several writers came each once, in
// each writer's order.
func checkStreams(t *testing.T, recs [][]byte, writers, per int) {
	t.Helper()
	next := make([]int, writers)
	for _, b := range recs {
		var r seqRec
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("record %q: %v", b, err)
		}
		if r.Writer < 0 || r.Writer >= writers || r.N != next[r.Writer] {
			t.Fatalf("writer %d record %d came when %v were next (lost, repeated or out of order)", r.Writer, r.N, next)
		}
		next[r.Writer]++
	}
	for w, n := range next {
		if n != per {
			t.Fatalf("writer %d: %d records of %d", w, n, per)
		}
	}
}

// Writers appending at once: a follower sees every record once, in each
// writer's order.
func testFollowConcurrentAppends(t *testing.T, e *env) {
	j := e.team.Journal()
	f, err := j.Follow(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const writers, per = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for n := range per {
				if err := j.Append(t.Context(), seqRec{"seq", w, n}); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		})
	}
	recs := follow(t, f, writers*per, time.Minute)
	wg.Wait()
	checkStreams(t, recs, writers, per)
	// And a second follower from the start reads the same, in the same
	// order.
	all := records(t, j, time.Minute)
	if len(all) != len(recs) {
		t.Fatalf("from the start: %d records, followed %d", len(all), len(recs))
	}
	for i := range all {
		if string(all[i]) != string(recs[i]) {
			t.Fatalf("record %d: %s from the start, %s followed", i, all[i], recs[i])
		}
	}
}

// A follower keeps its place across a restart of the store's server:
// nothing lost, nothing repeated, in order. (A store without a server
// has nothing to restart: the same stream is checked without.)
func testWatchAcrossRestart(t *testing.T, e *env) {
	j := e.team.Journal()
	f, err := j.Follow(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const per = 60
	appendAll := func(from, to int) {
		for n := from; n < to; n++ {
			for {
				err := j.Append(t.Context(), seqRec{"seq", 0, n})
				if err == nil {
					break
				}
				if t.Context().Err() != nil {
					return
				}
				time.Sleep(50 * time.Millisecond) // the server is down: try again
			}
		}
	}
	appendAll(0, per/3)
	first := follow(t, f, per/3, time.Minute)
	if e.target.Restart != nil {
		e.target.Restart(t)
	}
	appendAll(per/3, per/2)
	var wg sync.WaitGroup
	wg.Go(func() { appendAll(per/2, per) })
	if e.target.Restart != nil {
		time.Sleep(20 * time.Millisecond)
		e.target.Restart(t) // while a writer appends and the follower waits
	}
	rest := follow(t, f, per-per/3, 2*time.Minute)
	wg.Wait()
	checkStreams(t, append(first, rest...), 1, per)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if b, err := f.Next(ctx); err == nil {
		t.Fatalf("a record past the end: %s", b)
	}
}
