package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
)

func add(t *testing.T, q store.Tasks, ts ...protocol.Task) []protocol.Task {
	t.Helper()
	out, err := q.Add(ts)
	if err != nil {
		t.Fatalf("add: %v", err)
	}
	return out
}

func claim(t *testing.T, q store.Tasks, worker string, lease time.Duration) *protocol.Task {
	t.Helper()
	got, err := q.Claim(worker, lease)
	if err != nil {
		t.Fatalf("claim by %s: %v", worker, err)
	}
	return got
}

func ids(ts []protocol.Task) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.ID)
	}
	return strings.Join(s, ",")
}

func list(t *testing.T, q store.Tasks, opts queue.ListOptions) []protocol.Task {
	t.Helper()
	ts, err := q.List(opts)
	if err != nil {
		t.Fatalf("list %+v: %v", opts, err)
	}
	return ts
}

func show(t *testing.T, q store.Tasks, id string) *protocol.Task {
	t.Helper()
	got, err := q.Show(id)
	if err != nil {
		t.Fatalf("show %s: %v", id, err)
	}
	return got
}

// noResult: no result, as null or as nothing (both encode as null).
func noResult(r json.RawMessage) bool { return len(r) == 0 || string(r) == "null" }

func badInput(err error) bool {
	var bi interface{ BadInput() bool }
	return errors.As(err, &bi) && bi.BadInput()
}

// An invalid team name is bad input.
func testTeamName(t *testing.T, e *env) {
	if _, err := e.store.Team("../x"); !badInput(err) {
		t.Fatalf("Team(../x) = %v, want bad input", err)
	}
	if err := e.team.Exists(t.Context()); err == nil {
		t.Fatal("a fresh team exists")
	}
	add(t, e.tasks(), protocol.Task{Title: "x"})
	if err := e.team.Exists(t.Context()); err != nil {
		t.Fatalf("Exists after add: %v", err)
	}
}

// Tasks come back as added, with their defaults, in queue order; fields
// this version does not know are kept.
func testAddListShow(t *testing.T, e *env) {
	q := e.tasks()
	in := []protocol.Task{
		{ID: "a", Title: "  first  ", Prompt: "do a", Priority: 1, Labels: map[string]string{"k": "v"}, Verify: "true",
			Extra: map[string]json.RawMessage{"x_note": json.RawMessage(`{"b": [1, 2]}`)}},
		{Prompt: "second line one\nline two"},
		{ID: "c", Title: "c", DependsOn: []string{"a", " a "}, MaxAttempts: 5},
	}
	out := add(t, q, in...)
	if len(out) != 3 || out[0].Title != "first" || out[1].Title != "second line one" || !strings.HasPrefix(out[1].ID, "t-") {
		t.Fatalf("added %+v", out)
	}
	if out[2].MaxAttempts != 5 || out[0].MaxAttempts != queue.DefaultMaxAttempts || len(out[2].DependsOn) != 1 {
		t.Fatalf("defaults: %+v", out)
	}
	ts := list(t, q, queue.ListOptions{})
	if ids(ts) != "a,"+out[1].ID+",c" {
		t.Fatalf("order %s", ids(ts))
	}
	a := ts[0]
	if a.Status != protocol.StatusPending || a.Labels["k"] != "v" || a.Verify != "true" || a.Prompt != "do a" || a.Claim != nil || !noResult(a.Result) {
		t.Fatalf("a = %+v", a)
	}
	if a.CreatedAt.IsZero() || !a.CreatedAt.Equal(a.UpdatedAt) {
		t.Fatalf("times %v %v", a.CreatedAt, a.UpdatedAt)
	}
	enc, err := queue.EncodeTask(&a)
	if err != nil || !strings.Contains(string(enc), `"x_note":{"b":[1,2]}`) {
		t.Fatalf("unknown field lost: %s %v", enc, err)
	}
	if ts[1].DependsOn == nil || ts[1].Labels == nil {
		t.Fatalf("lists must be empty, not null: %+v", ts[1])
	}
	if !ts[2].Blocked || ts[0].Blocked {
		t.Fatalf("blocked: %v %v", ts[0].Blocked, ts[2].Blocked)
	}
	c := show(t, q, "c")
	if !c.Blocked || c.DependsOn[0] != "a" {
		t.Fatalf("show c = %+v", c)
	}
	if _, err := q.Show("nope"); !errors.Is(err, queue.ErrNotFound) || err.Error() != "task nope: task not found" {
		t.Fatalf("show nope: %v", err)
	}
	if got := list(t, q, queue.ListOptions{Status: []string{"blocked"}}); ids(got) != "c" {
		t.Fatalf("blocked list %s", ids(got))
	}
	if _, err := q.List(queue.ListOptions{Status: []string{"weird"}}); !badInput(err) {
		t.Fatalf("unknown status: %v", err)
	}
}

// Bad input changes nothing and says what is wrong, with the file store's
// words.
func testAddValidation(t *testing.T, e *env) {
	q := e.tasks()
	add(t, q, protocol.Task{ID: "old", Title: "old"})
	cases := []struct {
		in   []protocol.Task
		want string
	}{
		{[]protocol.Task{{ID: "n1", Title: "x"}, {ID: "n1", Title: "y"}}, "task n1 appears twice in the input (also task 1)"},
		{[]protocol.Task{{ID: "old", Title: "x"}}, "task old already exists"},
		{[]protocol.Task{{ID: "n2", Title: "x", DependsOn: []string{"ghost"}}}, "task n2 depends on unknown task ghost"},
		{[]protocol.Task{{ID: "n3", Title: "x", DependsOn: []string{"n4"}}, {ID: "n4", Title: "y", DependsOn: []string{"n3"}}}, "dependency cycle: n3 -> n4 -> n3"},
		{[]protocol.Task{{ID: "n5"}}, "task needs a title (or a prompt)"},
		{[]protocol.Task{{ID: "bad id", Title: "x"}}, `invalid task id name "bad id"`},
		{[]protocol.Task{{ID: "n6", Title: "x", MaxAttempts: -1}}, "max_attempts must be at least 1, got -1"},
		{[]protocol.Task{{ID: "n7", Title: "x", DependsOn: []string{"n7"}}}, "task n7 depends on itself"},
	}
	for _, c := range cases {
		_, err := q.Add(c.in)
		var ie *queue.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("add %+v: %v, want %q", c.in, err, c.want)
		}
	}
	if ts := list(t, q, queue.ListOptions{}); ids(ts) != "old" {
		t.Fatalf("bad input changed the queue: %s", ids(ts))
	}
	if _, err := q.Claim("bad/worker", 0); !badInput(err) {
		t.Fatalf("bad worker name: %v", err)
	}
	if _, err := q.Claim("w", queue.MaxLease+time.Hour); !badInput(err) {
		t.Fatalf("lease past MaxLease: %v", err)
	}
}

// Claims go by priority, then age; every claim is an attempt with a new,
// larger token; nothing claimable is ErrNothing.
func testClaimOrder(t *testing.T, e *env) {
	q := e.tasks()
	add(t, q, protocol.Task{ID: "low", Title: "low"}, protocol.Task{ID: "hi1", Title: "hi1", Priority: 5},
		protocol.Task{ID: "mid", Title: "mid", Priority: 2}, protocol.Task{ID: "hi2", Title: "hi2", Priority: 5})
	var last int64
	for _, want := range []string{"hi1", "hi2", "mid", "low"} {
		got := claim(t, q, "w1", time.Minute)
		if got.ID != want || got.Status != protocol.StatusClaimed || got.Attempts != 1 || got.Claim.Worker != "w1" {
			t.Fatalf("claimed %+v, want %s", got, want)
		}
		if got.Claim.Token <= last {
			t.Fatalf("token %d after %d", got.Claim.Token, last)
		}
		last = got.Claim.Token
		if d := time.Until(got.Claim.Until); d < 50*time.Second || d > 70*time.Second {
			t.Fatalf("lease until %v (in %v)", got.Claim.Until, d)
		}
	}
	if _, err := q.Claim("w1", time.Minute); !errors.Is(err, queue.ErrNothing) {
		t.Fatalf("empty queue: %v", err)
	}
	if got := list(t, q, queue.ListOptions{Worker: "w1"}); len(got) != 4 {
		t.Fatalf("worker filter: %s", ids(got))
	}
	if got := list(t, q, queue.ListOptions{Worker: "w2"}); len(got) != 0 {
		t.Fatalf("worker filter w2: %s", ids(got))
	}
}

// A task waits for all its dependencies to be done; a failed dependency
// leaves it stuck.
func testDependencies(t *testing.T, e *env) {
	q := e.tasks()
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"},
		protocol.Task{ID: "c", Title: "c", Priority: 9, DependsOn: []string{"a", "b"}})
	a := claim(t, q, "w", time.Minute)
	b := claim(t, q, "w", time.Minute)
	if a.ID != "a" || b.ID != "b" {
		t.Fatalf("claimed %s %s before their dependent", a.ID, b.ID)
	}
	if _, err := q.Claim("w", time.Minute); !errors.Is(err, queue.ErrNothing) {
		t.Fatalf("c claimable with deps claimed: %v", err)
	}
	if _, err := q.Complete("a", a.Claim.Token, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Claim("w", time.Minute); !errors.Is(err, queue.ErrNothing) {
		t.Fatalf("c claimable with b claimed: %v", err)
	}
	if _, err := q.Complete("b", b.Claim.Token, json.RawMessage(`"ok"`)); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, q, "w", time.Minute); c.ID != "c" {
		t.Fatalf("claimed %s", c.ID)
	}
	// A dependency that fails leaves its dependents stuck.
	add(t, q, protocol.Task{ID: "d", Title: "d"}, protocol.Task{ID: "e", Title: "e", DependsOn: []string{"d"}},
		protocol.Task{ID: "f", Title: "f", DependsOn: []string{"e"}})
	d := claim(t, q, "w", time.Minute)
	if _, err := q.Fail("d", d.Claim.Token, "broken", false); err != nil {
		t.Fatal(err)
	}
	st, err := q.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Blocked != 2 || st.Stuck != 2 || st.Claimable != 0 || st.Claimed != 1 || st.Drained {
		t.Fatalf("stats %+v", st)
	}
}

// A lease that runs out makes the task claimable again with a new token;
// the old token changes nothing any more.
func testLeaseExpiryAndFencing(t *testing.T, e *env) {
	q := e.tasks()
	add(t, q, protocol.Task{ID: "a", Title: "a"})
	first := claim(t, q, "w1", 300*time.Millisecond)
	if _, err := q.Claim("w2", time.Minute); !errors.Is(err, queue.ErrNothing) {
		t.Fatalf("claimed under a live lease: %v", err)
	}
	if r, err := q.Renew("a", first.Claim.Token, 400*time.Millisecond); err != nil || !r.Claim.Until.After(first.Claim.Until) {
		t.Fatalf("renew: %v %+v", err, r)
	}
	time.Sleep(700 * time.Millisecond)
	st, err := q.Stats()
	if err != nil || st.Expired != 1 || st.Claimable != 1 {
		t.Fatalf("stats after expiry: %v %+v", err, st)
	}
	second := claim(t, q, "w2", time.Minute)
	if second.ID != "a" || second.Attempts != 2 || second.Claim.Token <= first.Claim.Token {
		t.Fatalf("second claim %+v", second)
	}
	stale := first.Claim.Token
	want := fmt.Sprintf("task a: lease lost: token %d is not the current claim, worker w2 holds it with token %d", stale, second.Claim.Token)
	for name, op := range map[string]func() error{
		"renew":    func() error { _, err := q.Renew("a", stale, time.Minute); return err },
		"complete": func() error { _, err := q.Complete("a", stale, json.RawMessage(`1`)); return err },
		"fail":     func() error { _, err := q.Fail("a", stale, "x", true); return err },
		"release":  func() error { _, err := q.Release("a", stale); return err },
		"unclaim":  func() error { _, err := q.Unclaim("a", stale, "x"); return err },
	} {
		if err := op(); !errors.Is(err, queue.ErrLeaseLost) || err.Error() != want {
			t.Errorf("%s with a stale token: %v, want %q", name, err, want)
		}
	}
	now := show(t, q, "a")
	if now.Status != protocol.StatusClaimed || now.Claim.Token != second.Claim.Token || !noResult(now.Result) || now.Attempts != 2 {
		t.Fatalf("a stale token changed the task: %+v", now)
	}
	if _, err := q.Complete("zz", 1, nil); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("complete unknown: %v", err)
	}
	// The journal tells the story: the expiry, then the new claim.
	evs := taskEvents(t, e)
	var ops []string
	for _, ev := range evs {
		ops = append(ops, ev.Op)
	}
	if got := strings.Join(ops, ","); got != "add,claim,renew,expire,claim" {
		t.Fatalf("journal ops %s", got)
	}
	ex := evs[3]
	if ex.Worker != "w1" || ex.Token != stale || ex.Status != protocol.StatusPending || !strings.HasPrefix(ex.Reason, "lease expired at ") {
		t.Fatalf("expire event %+v", ex)
	}
}

// A task whose lease expired on its last attempt fails instead of being
// claimed again.
func testExpiryExhaustsAttempts(t *testing.T, e *env) {
	q := e.tasks()
	add(t, q, protocol.Task{ID: "one", Title: "one", MaxAttempts: 1, Priority: 1}, protocol.Task{ID: "two", Title: "two"})
	one := claim(t, q, "w1", 200*time.Millisecond)
	time.Sleep(400 * time.Millisecond)
	two := claim(t, q, "w2", time.Minute)
	if two.ID != "two" {
		t.Fatalf("claimed %s", two.ID)
	}
	got := show(t, q, "one")
	want := queue.ExhaustMessage(one)
	if got.Status != protocol.StatusFailed || got.Error == nil || *got.Error != want || got.Claim == nil || got.Claim.Token != one.Claim.Token {
		t.Fatalf("one = %+v, want failed with %q", got, want)
	}
	if _, err := q.Claim("w3", time.Minute); !errors.Is(err, queue.ErrNothing) {
		t.Fatalf("claim: %v", err)
	}
}

// Complete is idempotent with its token; fail retries while attempts
// remain; release keeps the attempt and unclaim gives it back.
func testCompleteFailRelease(t *testing.T, e *env) {
	q := e.tasks()
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b", MaxAttempts: 2}, protocol.Task{ID: "c", Title: "c"})
	a := claim(t, q, "w", time.Minute)
	if _, err := q.Complete("a", a.Claim.Token, json.RawMessage(`{not json`)); !badInput(err) {
		t.Fatalf("bad result: %v", err)
	}
	done, err := q.Complete("a", a.Claim.Token, json.RawMessage("{\"n\": [1, 2],\n \"s\": \"<&>\"}"))
	if err != nil || done.Status != protocol.StatusDone || string(done.Result) != `{"n":[1,2],"s":"<&>"}` {
		t.Fatalf("complete: %v %+v %s", err, done, done.Result)
	}
	again, err := q.Complete("a", a.Claim.Token, nil)
	if err != nil || string(again.Result) != `{"n":[1,2],"s":"<&>"}` {
		t.Fatalf("complete again: %v %+v", err, again)
	}
	if _, err := q.Complete("a", a.Claim.Token+100, nil); !errors.Is(err, queue.ErrLeaseLost) ||
		err.Error() != fmt.Sprintf("task a: lease lost: token %d is not the current claim, it is done (token %d)", a.Claim.Token+100, a.Claim.Token) {
		t.Fatalf("complete done with another token: %v", err)
	}

	b := claim(t, q, "w", time.Minute)
	f, err := q.Fail("b", b.Claim.Token, "try again", true)
	if err != nil || f.Status != protocol.StatusPending || f.Claim != nil || *f.Error != "try again" || f.Attempts != 1 {
		t.Fatalf("fail with retry: %v %+v", err, f)
	}
	b2 := claim(t, q, "w", time.Minute)
	if b2.ID != "b" || b2.Attempts != 2 {
		t.Fatalf("reclaim b: %+v", b2)
	}
	f, err = q.Fail("b", b2.Claim.Token, "out of tries", true)
	if err != nil || f.Status != protocol.StatusFailed || f.Claim == nil {
		t.Fatalf("fail without attempts left: %v %+v", err, f)
	}

	c := claim(t, q, "w", time.Minute)
	r, err := q.Release("c", c.Claim.Token)
	if err != nil || r.Status != protocol.StatusPending || r.Claim != nil || r.Attempts != 1 {
		t.Fatalf("release: %v %+v", err, r)
	}
	c2 := claim(t, q, "w", time.Minute)
	u, err := q.Unclaim("c", c2.Claim.Token, "could not write the task")
	if err != nil || u.Status != protocol.StatusPending || u.Attempts != 1 {
		t.Fatalf("unclaim: %v %+v", err, u)
	}
	evs := taskEvents(t, e)
	last := evs[len(evs)-1]
	if last.Op != "release" || last.Worker != "w" || last.Token != c2.Claim.Token || last.Reason != "could not write the task" {
		t.Fatalf("unclaim event %+v", last)
	}
	var fails []protocol.TaskEvent
	for _, ev := range evs {
		if ev.Op == "fail" {
			fails = append(fails, ev)
		}
	}
	if len(fails) != 2 || fails[0].Worker != "w" || fails[0].Token != b.Claim.Token || fails[0].Status != protocol.StatusPending || fails[0].Reason != "try again" {
		t.Fatalf("fail events %+v", fails)
	}
}

// ReleaseWorker releases a stopped worker's claims, and with before only
// those older than the mark.
func testReleaseWorker(t *testing.T, e *env) {
	q := e.tasks()
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"}, protocol.Task{ID: "c", Title: "c"}, protocol.Task{ID: "d", Title: "d"})
	claim(t, q, "w9", time.Minute)
	claim(t, q, "w9", time.Minute)
	other := claim(t, q, "w1", time.Minute)
	st, err := q.Stats()
	if err != nil {
		t.Fatal(err)
	}
	mark := st.NextToken
	if mark <= other.Claim.Token {
		t.Fatalf("next token %d not past %d", mark, other.Claim.Token)
	}
	restarted := claim(t, q, "w9", time.Minute)
	if restarted.Claim.Token < mark {
		t.Fatalf("a later claim has token %d below the mark %d", restarted.Claim.Token, mark)
	}
	rel, err := q.ReleaseWorker("w9", "worker stopped", mark)
	if err != nil || ids(rel) != "a,b" {
		t.Fatalf("release w9: %v %s", err, ids(rel))
	}
	if got := show(t, q, restarted.ID); got.Status != protocol.StatusClaimed || got.Claim.Token != restarted.Claim.Token {
		t.Fatalf("the restarted worker's claim was released: %+v", got)
	}
	if got := show(t, q, other.ID); got.Status != protocol.StatusClaimed {
		t.Fatalf("another worker's claim was released: %+v", got)
	}
	rel, err = q.ReleaseWorker("w9", "", 0)
	if err != nil || ids(rel) != "d" {
		t.Fatalf("release all of w9: %v %s", err, ids(rel))
	}
	evs := taskEvents(t, e)
	last := evs[len(evs)-1]
	if last.Op != "release" || last.Task != "d" || last.Worker != "w9" || last.Token != restarted.Claim.Token {
		t.Fatalf("release event %+v", last)
	}
}

// Cancel is all or none; a cancelled claim's holder loses its lease.
func testCancel(t *testing.T, e *env) {
	q := e.tasks()
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"}, protocol.Task{ID: "c", Title: "c"})
	a := claim(t, q, "w", time.Minute)
	if _, err := q.CancelAll([]string{"b", "ghost"}, "no"); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("cancel with an unknown id: %v", err)
	}
	if got := show(t, q, "b"); got.Status != protocol.StatusPending {
		t.Fatalf("a failed cancel changed b: %+v", got)
	}
	out, err := q.CancelAll([]string{"a", "b", "b"}, "not needed")
	if err != nil || len(out) != 3 || out[0].Status != protocol.StatusCancelled || out[2].Status != protocol.StatusCancelled || *out[1].Error != "not needed" {
		t.Fatalf("cancel: %v %+v", err, out)
	}
	if out[0].Claim == nil || out[0].Claim.Token != a.Claim.Token {
		t.Fatalf("a cancelled claim keeps its claim: %+v", out[0])
	}
	if _, err := q.Complete("a", a.Claim.Token, nil); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("complete a cancelled task: %v", err)
	}
	if again, err := q.Cancel("b", "again"); err != nil || again.Status != protocol.StatusCancelled || *again.Error != "not needed" {
		t.Fatalf("cancel again: %v %+v", err, again)
	}
	c := claim(t, q, "w", time.Minute)
	if _, err := q.Complete("c", c.Claim.Token, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Cancel("c", ""); !errors.Is(err, queue.ErrFinished) || err.Error() != "task c: task already finished: it is done" {
		t.Fatalf("cancel done: %v", err)
	}
	n := 0
	for _, ev := range taskEvents(t, e) {
		if ev.Op == "cancel" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d cancel events, want 2", n)
	}
}

// Archived tasks leave the live list but Show, List --archived, repeated
// completes and dependencies still see them; prune deletes them, and live
// dependents keep their final status.
func testArchiveAndPrune(t *testing.T, e *env) {
	q := e.tasks()
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"})
	a := claim(t, q, "w", time.Minute)
	if _, err := q.Complete("a", a.Claim.Token, json.RawMessage(`7`)); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Archive(time.Hour); err != nil || n != 0 {
		t.Fatalf("archive of recent tasks: %d %v", n, err)
	}
	if n, err := q.Archive(0); err != nil || n != 1 {
		t.Fatalf("archive: %d %v", n, err)
	}
	if got := list(t, q, queue.ListOptions{}); ids(got) != "b" {
		t.Fatalf("live after archive: %s", ids(got))
	}
	if got := list(t, q, queue.ListOptions{Archived: true}); ids(got) != "a,b" {
		t.Fatalf("list --archived: %s", ids(got))
	}
	if got := show(t, q, "a"); got.Status != protocol.StatusDone || string(got.Result) != "7" {
		t.Fatalf("show archived: %+v", got)
	}
	if _, err := q.Complete("a", a.Claim.Token, nil); err != nil {
		t.Fatalf("repeat complete of an archived task: %v", err)
	}
	if _, err := q.Add([]protocol.Task{{ID: "a", Title: "again"}}); err == nil || !strings.Contains(err.Error(), "task a already exists (archived)") {
		t.Fatalf("re-add archived id: %v", err)
	}
	if _, err := q.Cancel("a", ""); !errors.Is(err, queue.ErrFinished) || !strings.Contains(err.Error(), "(archived)") {
		t.Fatalf("cancel archived: %v", err)
	}
	// A new task may depend on the archived one, which is done.
	add(t, q, protocol.Task{ID: "c", Title: "c", Priority: 9, DependsOn: []string{"a"}})
	st, _ := q.Stats()
	if st.Archived != 1 || st.Live != 2 || st.Done != 1 {
		t.Fatalf("stats after archive: %+v", st)
	}
	// Prune a (archived, done): c keeps seeing it done.
	if n, err := q.Prune(0); err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
	if _, err := q.Show("a"); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("show pruned: %v", err)
	}
	if got := claim(t, q, "w", time.Minute); got.ID != "c" {
		t.Fatalf("claimed %s, want c (its pruned dependency was done)", got.ID)
	}
	if _, err := q.Add([]protocol.Task{{ID: "a", Title: "again"}}); err == nil || !strings.Contains(err.Error(), "task a already exists (done, then pruned; live tasks depend on it)") {
		t.Fatalf("re-add pruned id with dependents: %v", err)
	}
	st, _ = q.Stats()
	if st.Archived != 0 || st.Done != 0 || st.Live != 2 {
		t.Fatalf("stats after prune: %+v", st)
	}
	var ops []string
	for _, ev := range taskEvents(t, e) {
		if ev.Op == "archive" || ev.Op == "prune" {
			ops = append(ops, ev.Op+":"+ev.Task+":"+ev.Status)
		}
	}
	if got := strings.Join(ops, ","); got != "archive:a:done,prune:a:done" {
		t.Fatalf("journal: %s", got)
	}
}

// Stats counts as the file store does.
func testStats(t *testing.T, e *env) {
	q := e.tasks()
	st, err := q.Stats()
	if err != nil || st.Type != "stats" || st.Live != 0 || !st.Drained || st.NextToken < 1 {
		t.Fatalf("empty stats: %v %+v", err, st)
	}
	add(t, q, protocol.Task{ID: "x", Title: "x"}, protocol.Task{ID: "y", Title: "y"},
		protocol.Task{ID: "p1", Title: "p1"}, protocol.Task{ID: "p2", Title: "p2"}, protocol.Task{ID: "blk", Title: "blk", DependsOn: []string{"p1"}})
	x := claim(t, q, "w", time.Minute)
	y := claim(t, q, "w", time.Minute)
	if _, err := q.Complete(x.ID, x.Claim.Token, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Cancel(y.ID, ""); err != nil {
		t.Fatal(err)
	}
	if p1 := claim(t, q, "w", time.Minute); p1.ID != "p1" {
		t.Fatalf("claimed %s", p1.ID)
	}
	st, err = q.Stats()
	if err != nil {
		t.Fatal(err)
	}
	got := *st
	got.TS, got.Throughput, got.OldestPendingAge = time.Time{}, protocol.QueueThroughput{}, 0
	want := protocol.QueueStats{Type: "stats", Live: 5, Pending: 2, Claimed: 1, Done: 1, Cancelled: 1, Claimable: 1, Blocked: 1,
		OldestPending: "p2", NextToken: st.NextToken}
	if got != want {
		t.Fatalf("stats\n got %+v\nwant %+v", got, want)
	}
	if st.NextToken <= 3 {
		t.Fatalf("next token %d after 3 claims", st.NextToken)
	}
	if st.Throughput.Last1m != 1 || st.Throughput.Last15m != 1 {
		t.Fatalf("throughput %+v", st.Throughput)
	}
	if st.OldestPendingAge < 0 || st.OldestPendingAge > 60 {
		t.Fatalf("oldest pending age %v", st.OldestPendingAge)
	}
	if time.Since(st.TS) > time.Minute || st.TS.Location() != time.UTC {
		t.Fatalf("ts %v", st.TS)
	}
}

// WaitClaim returns a task added while it waits, and ErrNothing when the
// wait runs out.
func testWaitClaim(t *testing.T, e *env) {
	q := e.tasks()
	start := time.Now()
	if _, err := q.WaitClaim(t.Context(), "w", time.Minute, 300*time.Millisecond); !errors.Is(err, queue.ErrNothing) {
		t.Fatalf("wait on an empty queue: %v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("returned after %v, before the wait ran out", d)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		q.Add([]protocol.Task{{ID: "late", Title: "late"}})
	}()
	got, err := q.WaitClaim(t.Context(), "w", time.Minute, 30*time.Second)
	if err != nil || got.ID != "late" {
		t.Fatalf("wait for an add: %v %+v", err, got)
	}
	t.Logf("woke %v after the add was due", time.Since(start)-600*time.Millisecond)
	ctx, cancel := contextWithCancelAfter(t, 200*time.Millisecond)
	defer cancel()
	if _, err := q.WaitClaim(ctx, "w", time.Minute, 30*time.Second); err == nil || errors.Is(err, queue.ErrNothing) {
		t.Fatalf("wait with a cancelled context: %v", err)
	}
}

// A claim made with a claim id (queue.WithClaimID) records it with the
// claim: the claim's answer, Show and List carry it, a renewal keeps it,
// and a later claim of the task, with another id, replaces it. An id that
// is too long or not printable is bad input.
func testClaimID(t *testing.T, e *env) {
	q := e.tasks()
	add(t, q, protocol.Task{ID: "a", Title: "a"}, protocol.Task{ID: "b", Title: "b"})
	ctx := queue.WithClaimID(context.Background(), "c-1")
	got, err := q.WaitClaim(ctx, "w1", 300*time.Millisecond, 0)
	if err != nil || got.ID != "a" || got.Claim.ID != "c-1" {
		t.Fatalf("claim with an id: %v %+v", err, got)
	}
	if s := show(t, q, "a"); s.Claim == nil || s.Claim.ID != "c-1" {
		t.Fatalf("show: claim %+v, want id c-1", s.Claim)
	}
	if r, err := q.Renew("a", got.Claim.Token, 300*time.Millisecond); err != nil || r.Claim.ID != "c-1" {
		t.Fatalf("renew: %v, claim %+v, want id c-1 kept", err, r)
	}
	ls := list(t, q, queue.ListOptions{Status: []string{protocol.StatusClaimed}, Worker: "w1"})
	if len(ls) != 1 || ls[0].Claim.ID != "c-1" {
		t.Fatalf("list: %+v, want a with claim id c-1", ls)
	}
	for _, bad := range []string{strings.Repeat("x", queue.MaxClaimID+1), "a b", "é"} {
		if _, err := q.WaitClaim(queue.WithClaimID(context.Background(), bad), "w1", time.Minute, 0); !badInput(err) {
			t.Errorf("claim id %q: %v, want bad input", bad, err)
		}
	}
	// After the lease ends, the claim of another call records its own id.
	deadline := time.Now().Add(5 * time.Second)
	for {
		again, err := q.WaitClaim(queue.WithClaimID(context.Background(), "c-2"), "w2", time.Minute, time.Second)
		if err == nil && again.ID == "a" {
			if again.Claim.ID != "c-2" || show(t, q, "a").Claim.ID != "c-2" {
				t.Fatalf("claim again: %+v, want id c-2", again.Claim)
			}
			break
		}
		if err == nil { // b first
			continue
		}
		if !errors.Is(err, queue.ErrNothing) || time.Now().After(deadline) {
			t.Fatalf("claim again: %v", err)
		}
	}
}
