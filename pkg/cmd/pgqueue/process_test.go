package pgqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/protocol/validate"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// The tests below run pg-queue as real processes. TestMain builds the
// binary once, as `make build` would but without the race detector (a
// race-instrumented process per call would make thousands of calls slow)
// and with the crash hook of crashhook.go. A binary that does not build
// fails every test: running something else in its place would hide it.
var pgQueueBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "pgqueue-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "build pg-queue: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "pg-queue")
	if err := buildPgQueue(bin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pgQueueBin = bin
	return m.Run()
}

// buildPgQueue builds the binary the process tests run, with the crash hook.
func buildPgQueue(bin string) error {
	build := exec.Command("go", "build", "-trimpath", "-tags", "pgqueue_crashtest", "-o", bin, "github.com/powerglide/powerglide/cmd/pg-queue")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build pg-queue: %v\n%s", err, out)
	}
	return nil
}

// team is a private data root with one team, and a way to run pg-queue in it.
type team struct {
	t    *testing.T
	home string
	name string
	env  []string
}

func newTeam(t *testing.T, name string) *team {
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "POWERGLIDE_") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home, "POWERGLIDE_HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"), "POWERGLIDE_TEAM="+name)
	return &team{t: t, home: home, name: name, env: env}
}

func (tm *team) dir() teamdir.Dir { return teamdir.Dir{Home: tm.home, Team: tm.name} }

func (tm *team) cmd(stdin string, args ...string) *exec.Cmd {
	c := exec.Command(pgQueueBin, args...)
	c.Env = tm.env
	c.Stdin = strings.NewReader(stdin)
	return c
}

// run runs pg-queue and returns stdout and the exit code.
func (tm *team) run(stdin string, args ...string) (string, int) {
	c := tm.cmd(stdin, args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		tm.t.Errorf("run %v: %v", args, err)
		return "", -1
	}
	return out.String(), 0
}

func tasksJSONL(prefix string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"id":"%s%d","title":"task %d","priority":%d,"max_attempts":1000}`+"\n", prefix, i, i, i%3)
	}
	return b.String()
}

// checkTeamFiles validates task-queue.json and events.jsonl as they are now.
func checkTeamFiles(t *testing.T, d teamdir.Dir) {
	t.Helper()
	data, err := os.ReadFile(d.Queue())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("task-queue.json does not parse: %v", err)
	}
	for _, raw := range doc.Tasks {
		if err := validate.JSON("task", raw); err != nil {
			t.Fatalf("task-queue.json: %v", err)
		}
	}
	ev, err := os.ReadFile(d.Events())
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Lines("journal-event", ev); err != nil {
		t.Fatalf("events.jsonl: %v", err)
	}
}

func journal(t *testing.T, d teamdir.Dir) []protocol.TaskEvent {
	t.Helper()
	data, err := os.ReadFile(d.Events())
	if err != nil {
		t.Fatal(err)
	}
	var out []protocol.TaskEvent
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var ev protocol.TaskEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("events.jsonl line %q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

// TestStressProcesses: 16 concurrent processes loop claim→complete over
// 2,000 tasks; every task is done exactly once and never claimed twice.
func TestStressProcesses(t *testing.T) {
	n, workers := 2000, 16
	if testing.Short() {
		n = 300
	}
	tm := newTeam(t, "stress")
	if out, code := tm.run(tasksJSONL("s", n), "add", "-"); code != 0 {
		t.Fatalf("add: exit %d: %s", code, out)
	}
	type claim struct {
		worker string
		token  int64
	}
	var mu sync.Mutex
	claims := map[string][]claim{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("w", w)
			for {
				out, code := tm.run("", "claim", "--worker", name, "--lease", "10m")
				if code == 3 {
					return
				}
				if code != 0 {
					t.Errorf("claim: exit %d: %s", code, out)
					return
				}
				var task protocol.Task
				if err := json.Unmarshal([]byte(out), &task); err != nil || task.Claim == nil {
					t.Errorf("claim output %q: %v", out, err)
					return
				}
				mu.Lock()
				claims[task.ID] = append(claims[task.ID], claim{name, task.Claim.Token})
				mu.Unlock()
				out, code = tm.run("", "complete", task.ID, "--token", fmt.Sprint(task.Claim.Token), "--result", `{"by":"`+name+`"}`)
				if code != 0 {
					t.Errorf("complete %s: exit %d: %s", task.ID, code, out)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(claims) != n {
		t.Fatalf("%d tasks claimed, want %d", len(claims), n)
	}
	tokens := map[int64]string{}
	for id, cs := range claims {
		if len(cs) != 1 {
			t.Fatalf("task %s claimed %d times: %v", id, len(cs), cs)
		}
		if other, dup := tokens[cs[0].token]; dup {
			t.Fatalf("token %d given to %s and %s", cs[0].token, id, other)
		}
		tokens[cs[0].token] = id
	}
	d := tm.dir()
	checkTeamFiles(t, d)
	q, err := queue.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	st, err := q.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Done != n || st.Pending != 0 || st.Claimed != 0 || !st.Drained {
		t.Fatalf("stats: %+v", st)
	}
	all, err := q.List(queue.ListOptions{Archived: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range all {
		c := claims[task.ID][0]
		if task.Status != protocol.StatusDone || task.Claim.Token != c.token || string(task.Result) != `{"by":"`+c.worker+`"}` {
			t.Fatalf("task %s: %+v, claimed by %v", task.ID, task, c)
		}
	}
	if len(all) != n {
		t.Fatalf("%d tasks live and archived, want %d", len(all), n)
	}
	ops := map[string]map[string]int{}
	for _, ev := range journal(t, d) {
		if ops[ev.Task] == nil {
			ops[ev.Task] = map[string]int{}
		}
		ops[ev.Task][ev.Op]++
	}
	for id, m := range ops {
		if m["add"] != 1 || m["claim"] != 1 || m["complete"] != 1 {
			t.Fatalf("journal for %s: %v", id, m)
		}
	}
}

// TestCrashProcesses SIGKILLs pg-queue processes at random moments while
// workers loop claim, then complete, fail --retry, release or renew, with
// short leases; a canceller cancels some tasks and a janitor archives and
// prunes, and finished tasks are auto-archived all along. The files parse
// at every instant, an add is all or nothing, every task is eventually
// done (or cancelled) exactly once, and the journal misses nothing: the
// claim tokens in it are exactly 1..next_token-1, and replaying it gives
// every task its real status.
func TestCrashProcesses(t *testing.T) {
	n, workers, batches, cancels := 240, 8, 12, 12
	if testing.Short() {
		n, batches, cancels = 80, 6, 6
	}
	tm := newTeam(t, "crash")
	// Auto-archiving every few completions, so that kills land in it.
	tm.env = append(tm.env, "POWERGLIDE_QUEUE_KEEP_FINISHED=12")
	d := tm.dir()
	if err := os.MkdirAll(d.Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A checker reads the files all along.
	var checks atomic.Int64
	stop := make(chan struct{})
	checkerDone := make(chan struct{})
	go func() {
		defer close(checkerDone)
		checked := 0 // bytes of events.jsonl already validated
		for {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
			}
			if data, err := os.ReadFile(d.Queue()); err == nil && !json.Valid(data) {
				t.Errorf("task-queue.json does not parse (%d bytes)", len(data))
				return
			}
			if data, err := os.ReadFile(d.Events()); err == nil {
				// Lines that are complete must parse; a line being
				// written may be seen half-way by a concurrent read.
				if i := bytes.LastIndexByte(data, '\n'); i >= checked {
					if err := validate.Lines("journal-event", data[checked:i+1]); err != nil {
						t.Errorf("events.jsonl: %v", err)
						return
					}
					checked = i + 1
				}
			}
			checks.Add(1)
		}
	}()

	// Kills land anywhere in a call: the delay is drawn up to twice the
	// time a call takes on this machine now.
	var calls []time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		tm.run("", "stats")
		calls = append(calls, time.Since(start))
	}
	slices.Sort(calls)
	killMax := max(2*calls[len(calls)/2], 5*time.Millisecond)
	t.Logf("a call takes %v: kills within %v", calls[len(calls)/2], killMax)

	var kills atomic.Int64
	// runKill runs pg-queue and SIGKILLs it after a random delay with
	// probability p. It reports whether the process was killed.
	runKill := func(p float64, stdin string, args ...string) (string, int, bool) {
		c := tm.cmd(stdin, args...)
		if rand.IntN(4) == 0 {
			// The process may also kill itself in a change.
			c.Env = append(slices.Clip(tm.env), "PGQUEUE_TEST_CRASH=0.15")
		}
		var out bytes.Buffer
		c.Stdout = &out
		if err := c.Start(); err != nil {
			t.Error(err)
			return "", -1, false
		}
		if rand.Float64() < p {
			timer := time.AfterFunc(time.Duration(rand.Int64N(int64(killMax))), func() { c.Process.Signal(syscall.SIGKILL) })
			defer timer.Stop()
		}
		err := c.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				kills.Add(1)
				return out.String(), -1, true
			}
			return out.String(), ee.ExitCode(), false
		}
		return out.String(), 0, false
	}

	// Adds, killed at random: each batch is all there or not at all.
	q, err := queue.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	per := n / batches
	for b := 0; b < batches; b++ {
		prefix := fmt.Sprintf("b%d-", b)
		if b == 0 {
			prefix = "x" // tasks the canceller goes after
		}
		for {
			_, code, killed := runKill(0.7, tasksJSONL(prefix, per), "add", "-")
			ts, err := q.List(queue.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			have := 0
			for _, task := range ts {
				if strings.HasPrefix(task.ID, prefix) {
					have++
				}
			}
			if have != 0 && have != per {
				t.Fatalf("batch %d half added: %d of %d tasks", b, have, per)
			}
			if !killed && code != 0 {
				t.Fatalf("add batch %d: exit %d", b, code)
			}
			if have == per {
				break
			}
		}
	}
	n = per * batches
	cancels = min(cancels, per)

	finished := func() bool {
		st, err := q.Stats()
		if err != nil {
			t.Error(err)
			return true
		}
		return st.Pending == 0 && st.Claimed == 0
	}
	var cycles atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("w", w)
			for ctx.Err() == nil && !t.Failed() {
				out, code, killed := runKill(0.3, "", "claim", "--worker", name, "--lease", "1s")
				if killed {
					continue
				}
				if code == 3 {
					if finished() {
						return
					}
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if code != 0 {
					t.Errorf("claim: exit %d: %s", code, out)
					return
				}
				var task protocol.Task
				if err := json.Unmarshal([]byte(out), &task); err != nil {
					t.Errorf("claim output %q: %v", out, err)
					return
				}
				tok := fmt.Sprint(task.Claim.Token)
				cycles.Add(1)
				// Now and then the worker gives the task back, or renews
				// first; a kill leaves the lease to expire.
				switch r := rand.IntN(10); {
				case r == 0:
					runKill(0.3, "", "release", task.ID, "--token", tok)
					continue
				case r == 1:
					runKill(0.3, "", "fail", task.ID, "--token", tok, "--error", "flaky", "--retry")
					continue
				case r == 2:
					if _, _, killed := runKill(0.3, "", "renew", task.ID, "--token", tok, "--lease", "2s"); killed {
						continue
					}
				}
				// Complete, retrying after a kill with the same token:
				// done again is a harmless success, lease lost means
				// another worker has the task now (or it was cancelled).
				for ctx.Err() == nil {
					out, code, killed = runKill(0.3, "", "complete", task.ID, "--token", tok)
					if killed {
						continue
					}
					if code != 0 && !strings.Contains(out, `"kind":"lease_lost"`) {
						t.Errorf("complete %s: exit %d: %s", task.ID, code, out)
					}
					break
				}
			}
		}()
	}
	// The canceller: cancel is all or nothing, so a kill or a task
	// finished meanwhile leaves the others to the next try.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < cancels && ctx.Err() == nil && !t.Failed(); {
			out, code, killed := runKill(0.5, "", "cancel", fmt.Sprint("x", i), "--reason", "not needed")
			switch {
			case killed:
			case code == 0 || strings.Contains(out, `"kind":"finished"`) || strings.Contains(out, `"kind":"not_found"`):
				i++ // not found: done and pruned already
			default:
				t.Errorf("cancel x%d: exit %d: %s", i, code, out)
				return
			}
		}
	}()
	// The janitor archives and prunes, killed half the time.
	janitorDone := make(chan struct{})
	go func() {
		defer close(janitorDone)
		for ctx.Err() == nil && !t.Failed() {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if rand.IntN(2) == 0 {
				runKill(0.5, "", "archive", "--older-than", "1s")
			} else {
				runKill(0.5, "", "prune", "--older-than", "3s")
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-checkerDone
	<-janitorDone
	if ctx.Err() != nil {
		t.Fatalf("not every task was done in time")
	}
	if t.Failed() {
		return
	}
	t.Logf("%d tasks, %d claims, %d processes killed, %d file checks", n, cycles.Load(), kills.Load(), checks.Load())
	if kills.Load() == 0 {
		t.Fatal("no process was killed")
	}
	// One more change settles the last version, should its writer have
	// been killed before its journal append.
	if _, err := q.Claim("final", time.Second); !errors.Is(err, queue.ErrNothing) {
		t.Fatalf("final claim: %v", err)
	}
	checkTeamFiles(t, d)
	st, err := q.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending != 0 || st.Claimed != 0 || st.Failed != 0 {
		t.Fatalf("stats: %+v", st)
	}
	all, err := q.List(queue.ListOptions{Archived: true})
	if err != nil {
		t.Fatal(err)
	}
	real := map[string]protocol.Task{}
	for _, task := range all {
		real[task.ID] = task
	}

	// The journal against the files.
	type history struct {
		status              string
		adds, done, cancels int
		pruned, archived    bool
		lastClaim           int64
	}
	hist := map[string]*history{}
	tokens := map[int64]int{}
	for _, ev := range journal(t, d) {
		h := hist[ev.Task]
		if h == nil {
			h = &history{}
			hist[ev.Task] = h
		}
		if h.pruned {
			t.Fatalf("event after the prune of %s: %+v", ev.Task, ev)
		}
		switch ev.Op {
		case "add":
			h.adds++
		case "claim":
			tokens[ev.Token]++
			h.lastClaim = ev.Token
		case "complete":
			h.done++
		case "cancel":
			h.cancels++
		case "prune":
			h.pruned = true
		case "archive":
			h.archived = true
		}
		h.status = ev.Status
	}
	for tok := int64(1); tok < st.NextToken; tok++ {
		if tokens[tok] != 1 {
			t.Fatalf("token %d is in %d claim events (next token %d)", tok, tokens[tok], st.NextToken)
		}
	}
	if len(tokens) != int(st.NextToken-1) {
		t.Fatalf("%d claim tokens in the journal, next token %d", len(tokens), st.NextToken)
	}
	if len(hist) != n {
		t.Fatalf("%d tasks in the journal, want %d", len(hist), n)
	}
	var pruned, cancelled, archived int
	for id, h := range hist {
		if h.archived {
			archived++
		}
		task, ok := real[id]
		switch {
		case h.adds != 1 || h.done+h.cancels != 1:
			t.Fatalf("task %s: journal %+v", id, h)
		case h.pruned && ok:
			t.Fatalf("task %s pruned in the journal but still there: %+v", id, task)
		case h.pruned:
			pruned++
		case !ok:
			t.Fatalf("task %s lost: journal %+v", id, h)
		case task.Status != h.status:
			t.Fatalf("task %s is %s, the journal says %s", id, task.Status, h.status)
		case task.Status == protocol.StatusDone && task.Claim.Token != h.lastClaim:
			t.Fatalf("task %s done with token %d, last claimed with %d", id, task.Claim.Token, h.lastClaim)
		}
		if h.cancels == 1 {
			cancelled++
			if !strings.HasPrefix(id, "x") {
				t.Fatalf("task %s cancelled", id)
			}
		}
	}
	if len(real)+pruned != n || st.Done+st.Cancelled+pruned != n {
		t.Fatalf("%d tasks live or archived, %d pruned, want %d in all; stats %+v", len(real), pruned, n, st)
	}
	t.Logf("%d cancelled, %d archived, %d pruned", cancelled, archived, pruned)
	if archived == 0 || pruned == 0 {
		t.Fatalf("nothing was archived (%d) or pruned (%d)", archived, pruned)
	}
}

// TestCrashArchiveUnique: pg-queue processes SIGKILLed while they archive
// (by the crash hook, between the archive append and the commit, and from
// outside at random moments) never leave a task twice in
// task-archive.jsonl: its line count is its count of unique ids, so jq
// over the file counts right.
func TestCrashArchiveUnique(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 15
	}
	tm := newTeam(t, "archive")
	d := tm.dir()
	q, err := queue.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	kills := 0
	for r := range rounds {
		// A few more finished tasks each round, for the archive to take.
		var tasks []protocol.Task
		for i := range 3 {
			tasks = append(tasks, protocol.Task{ID: fmt.Sprintf("r%d-%d", r, i), Title: "t"})
		}
		if _, err := q.Add(tasks); err != nil {
			t.Fatal(err)
		}
		for range tasks {
			got, err := q.Claim("w", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.Complete(got.ID, got.Claim.Token, json.RawMessage(`{"round":1}`)); err != nil {
				t.Fatal(err)
			}
		}
		c := tm.cmd("", "archive")
		c.Env = append(slices.Clip(tm.env), "PGQUEUE_TEST_CRASH=0.5")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if rand.IntN(3) == 0 {
			timer := time.AfterFunc(time.Duration(rand.Int64N(int64(3*time.Millisecond))), func() { c.Process.Signal(syscall.SIGKILL) })
			defer timer.Stop()
		}
		var ee *exec.ExitError
		if err := c.Wait(); errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				kills++
			} else {
				t.Fatalf("archive: %v", err)
			}
		}
	}
	if out, code := tm.run("", "archive"); code != 0 {
		t.Fatalf("final archive: exit %d: %s", code, out)
	}
	data, err := os.ReadFile(filepath.Join(d.Path(), queue.ArchiveFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	ids := map[string]int{}
	for _, line := range lines {
		var task protocol.Task
		if err := json.Unmarshal([]byte(line), &task); err != nil {
			t.Fatalf("archive line %q: %v", line, err)
		}
		ids[task.ID]++
	}
	t.Logf("%d rounds, %d archivings killed, %d archive lines", rounds, kills, len(lines))
	if kills == 0 {
		t.Fatal("no archiving was killed")
	}
	if len(lines) != len(ids) || len(ids) != 3*rounds {
		var twice []string
		for id, n := range ids {
			if n > 1 {
				twice = append(twice, id)
			}
		}
		t.Fatalf("task-archive.jsonl: %d lines, %d unique ids, want %d of each; twice: %v", len(lines), len(ids), 3*rounds, twice)
	}
	st, err := q.Stats()
	if err != nil || st.Live != 0 || st.Archived != 3*rounds {
		t.Fatalf("stats %+v %v", st, err)
	}
}
