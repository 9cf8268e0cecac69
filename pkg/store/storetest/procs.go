package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
)

const (
	workerURLEnv = "STORETEST_WORKER_URL"
	// workerOneShotEnv, when set, has workers open their store one-shot.
	workerOneShotEnv = "STORETEST_WORKER_ONESHOT"
	workerNameEnv    = "STORETEST_WORKER_NAME"
	// workerHoldEnv, when set, has the worker claim one task, say
	// "claimed ID" on stdout and wait to be killed.
	workerHoldEnv = "STORETEST_WORKER_HOLD"
)

// IsWorker tells a test binary started by the process tests to be a claim
// worker (call Worker from TestMain, before m.Run).
func IsWorker() bool { return os.Getenv(workerURLEnv) != "" }

// workResult is what a worker completes a task with.
type workResult struct {
	Worker string `json:"worker"`
}

// Worker claims and completes tasks of team "t" of the store in
// $STORETEST_WORKER_URL as worker $STORETEST_WORKER_NAME until the queue
// is drained, then returns 0 (the exit code). Errors go to stderr.
func Worker(stderr io.Writer) int {
	return WorkerOpen(stderr, func(url string) (store.Store, error) {
		return open(url, os.Getenv(workerOneShotEnv) != "")
	})
}

// WorkerOpen is Worker for a target with its own Open.
func WorkerOpen(stderr io.Writer, openURL func(url string) (store.Store, error)) int {
	name := os.Getenv(workerNameEnv)
	s, err := openURL(os.Getenv(workerURLEnv))
	if err != nil {
		fmt.Fprintf(stderr, "worker %s: %v\n", name, err)
		return 1
	}
	defer s.Close()
	tm, err := s.Team("t")
	if err != nil {
		fmt.Fprintf(stderr, "worker %s: %v\n", name, err)
		return 1
	}
	if os.Getenv(workerHoldEnv) != "" {
		t, err := tm.Tasks().Claim(name, time.Second)
		if err != nil {
			fmt.Fprintf(stderr, "worker %s: %v\n", name, err)
			return 1
		}
		fmt.Printf("claimed %s\n", t.ID)
		select {} // until killed
	}
	if err := work(tm.Tasks(), name, time.Second, nil); err != nil {
		fmt.Fprintf(stderr, "worker %s: %v\n", name, err)
		return 1
	}
	return 0
}

// work claims and completes until the queue is drained. A lost lease is
// not an error (another worker took the task over); other errors are
// retried a while (a store under load, a server restarting).
func work(q store.Tasks, name string, lease time.Duration, stop <-chan struct{}) error {
	result, _ := json.Marshal(workResult{name})
	fails := 0
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		t, err := q.Claim(name, lease)
		if errors.Is(err, queue.ErrNothing) {
			st, err := q.Stats()
			if err == nil && st.Drained {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err == nil {
			if rand.IntN(4) == 0 {
				time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) // "work": a window to be killed in
			}
			_, err = q.Complete(t.ID, t.Claim.Token, result)
			if errors.Is(err, queue.ErrLeaseLost) {
				err = nil
			}
		}
		if err != nil {
			if fails++; fails > 50 {
				return err
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		fails = 0
	}
}

func addMany(t *testing.T, q store.Tasks, n int) {
	t.Helper()
	var in []protocol.Task
	for i := range n {
		in = append(in, protocol.Task{ID: fmt.Sprintf("k%03d", i), Title: fmt.Sprint(i), MaxAttempts: 1000, Priority: i % 3})
	}
	add(t, q, in...)
}

// checkExactlyOnce: every task done, completed once (one complete event),
// by the worker whose claim it holds.
func checkExactlyOnce(t *testing.T, e *env, n int) {
	t.Helper()
	q := e.tasks()
	ts := list(t, q, queue.ListOptions{Archived: true})
	if len(ts) != n {
		t.Fatalf("%d tasks, want %d", len(ts), n)
	}
	for _, tk := range ts {
		var r workResult
		if tk.Status != protocol.StatusDone || json.Unmarshal(tk.Result, &r) != nil || tk.Claim == nil || r.Worker != tk.Claim.Worker {
			t.Fatalf("task %s: %+v (result %s)", tk.ID, tk, tk.Result)
		}
	}
	completes := map[string]int{}
	for _, ev := range taskEvents(t, e) {
		if ev.Op == "complete" {
			completes[ev.Task]++
		}
	}
	for _, tk := range ts {
		if completes[tk.ID] != 1 {
			t.Fatalf("task %s completed %d times", tk.ID, completes[tk.ID])
		}
	}
	if len(completes) != n {
		t.Fatalf("%d tasks completed, want %d", len(completes), n)
	}
}

// 16 claimers at once, each with a store of its own: every task done
// exactly once.
func testExactlyOnceGoroutines(t *testing.T, e *env) {
	const n, claimers = 300, 16
	addMany(t, e.tasks(), n)
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Go(func() {
			s, err := e.target.open(e.url)
			if err != nil {
				t.Errorf("open: %v", err)
				return
			}
			defer s.Close()
			tm, _ := s.Team("t")
			if err := work(tm.Tasks(), fmt.Sprintf("g%d", i), 30*time.Second, nil); err != nil {
				t.Errorf("claimer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	checkExactlyOnce(t, e, n)
	// Nobody died and no lease ran out: each task was claimed once.
	claims := map[string]int{}
	for _, ev := range taskEvents(t, e) {
		if ev.Op == "claim" {
			claims[ev.Task]++
		}
	}
	for id, c := range claims {
		if c != 1 {
			t.Fatalf("task %s claimed %d times", id, c)
		}
	}
	for _, tk := range list(t, e.tasks(), queue.ListOptions{}) {
		if tk.Attempts != 1 {
			t.Fatalf("task %s: %d attempts", tk.ID, tk.Attempts)
		}
	}
}

// 16 worker processes, SIGKILLed at random and replaced while they work:
// the killed ones' tasks return when their leases expire, and every task
// is done exactly once.
func testExactlyOnceProcesses(t *testing.T, e *env) {
	const n, procs, kills = 300, 16, 24
	addMany(t, e.tasks(), n)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := func(name string) []string {
		env := append(os.Environ(), workerURLEnv+"="+e.url, workerNameEnv+"="+name)
		if e.target.OneShot {
			env = append(env, workerOneShotEnv+"=1")
		}
		return env
	}
	held := killHolding(t, exe, env("holder"))
	var mu sync.Mutex
	running := map[int]*exec.Cmd{}
	var wg sync.WaitGroup
	next := 0
	start := func() {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = env(fmt.Sprintf("p%d", next))
		var errBuf syncBuffer
		cmd.Stderr = &errBuf
		if err := cmd.Start(); err != nil {
			t.Fatalf("start worker: %v", err)
		}
		id := next
		next++
		running[id] = cmd
		wg.Go(func() {
			err := cmd.Wait()
			mu.Lock()
			delete(running, id)
			mu.Unlock()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return // killed by the storm
			}
			if err != nil {
				t.Errorf("worker p%d: %v: %s", id, err, errBuf.String())
			}
		})
	}
	mu.Lock()
	for range procs {
		start()
	}
	mu.Unlock()
	t.Cleanup(func() {
		mu.Lock()
		for _, c := range running {
			c.Process.Kill()
		}
		mu.Unlock()
		wg.Wait()
	})
	killed := 0
	for killed < kills {
		time.Sleep(time.Duration(20+rand.IntN(60)) * time.Millisecond)
		mu.Lock()
		if len(running) == 0 {
			mu.Unlock()
			break
		}
		for id, c := range running {
			c.Process.Signal(syscall.SIGKILL)
			delete(running, id)
			break
		}
		killed++
		start()
		mu.Unlock()
	}
	t.Logf("%d workers SIGKILLed", killed)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		st, _ := e.tasks().Stats()
		t.Fatalf("workers still running after 3 minutes: %+v", st)
	}
	checkExactlyOnce(t, e, n)
	// The task of the worker killed holding it came back when its lease
	// ran out (an expire event), and another worker did it.
	expired := map[string]bool{}
	for _, ev := range taskEvents(t, e) {
		if ev.Op == "expire" {
			expired[ev.Task] = true
		}
	}
	if !expired[held] {
		t.Fatalf("the killed holder's task %s never expired (expired: %v)", held, expired)
	}
	for _, tk := range list(t, e.tasks(), queue.ListOptions{Archived: true}) {
		if tk.ID == held && (tk.Claim == nil || tk.Claim.Worker == "holder") {
			t.Fatalf("task %s of the killed holder: %+v", held, tk)
		}
	}
}

// killHolding starts a worker process that claims a task, SIGKILLs it
// while it holds the claim, and returns the task's id.
func killHolding(t *testing.T, exe string, env []string) string {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(env, workerHoldEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errBuf syncBuffer
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start holder: %v", err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var id string
	if _, err := fmt.Fscanf(out, "claimed %s\n", &id); err != nil {
		t.Fatalf("holder: %v: %s", err, errBuf.String())
	}
	return id
}

type syncBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
