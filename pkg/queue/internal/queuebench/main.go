// Command queuebench measures pg-queue through its command line, a fresh
// process per call, as workers driven by shell scripts use it: claim+complete
// cycles at several queue sizes and the throughput of concurrent workers,
// on the team directory or, with -store, on another team store.
// With -agent the calls on PostgreSQL go through the host's store agent.
// scripts/bench-queue.sh and scripts/bench-store.sh run it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

var (
	bin      = flag.String("bin", "bin/pg-queue", "the pg-queue binary")
	work     = flag.String("dir", "", "data root for the benchmark (default: a temporary directory)")
	cycles   = flag.Int("cycles", 300, "claim+complete cycles per size")
	sizes    = flag.String("sizes", "1000,10000,100000", "live queue sizes to measure")
	workers  = flag.Int("workers", 8, "concurrent workers for the throughput run")
	dur      = flag.Duration("duration", 10*time.Second, "longest throughput run")
	modes    = flag.String("sync", "true,false", "values of queue_sync to measure")
	store    = flag.String("store", "", "the team store (POWERGLIDE_STORE) of every call; default the team directory")
	postgres = flag.Bool("postgres", false, "start a PostgreSQL server of the benchmark's own (fsync on, a free local port) and use it as the store")
	pooler   = flag.Bool("pgbouncer", false, "with -postgres: reach the server through PgBouncer (session mode), as a host with many workers would")
	viaAgent = flag.Bool("agent", false, "with a PostgreSQL store: every call goes through this host's store agent (pg-queue agent, which the first call starts); without it each call connects itself (store_agent=off)")
	only     = flag.String("scenarios", "version,sizes,finished,concurrent", "the scenarios to run")
	syncFlag = "true"
)

// runs says whether scenario name was asked for.
func runs(name string) bool {
	for _, s := range strings.Split(*only, ",") {
		if s == name {
			return true
		}
	}
	return false
}

func main() {
	flag.Parse()
	root := *work
	if root == "" {
		d, err := os.MkdirTemp("", "queuebench-")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(d)
		root = d
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fail(err)
	}
	*bin = abs
	if *postgres {
		srv, err := pgtest.NewServer(pgtest.Options{Durable: true})
		if err != nil {
			fail(fmt.Errorf("start PostgreSQL: %w", err))
		}
		atExit = func() { _ = srv.Remove() }
		defer func() { atExit() }() // the atExit of the end, which may stop PgBouncer too
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go func() {
			<-sig
			atExit()
			os.Exit(130)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		*store, err = srv.CreateDB(ctx)
		cancel()
		if err != nil {
			fail(err)
		}
		bin, _ := pgtest.Bin()
		fmt.Printf("PostgreSQL (%s): a server of the benchmark's own on %s:%d, fsync and synchronous commit on\n", bin, srv.Host, srv.Port)
		if *pooler {
			via, stop, err := startPgBouncer(srv.Dir, *store)
			if err != nil {
				fail(fmt.Errorf("start PgBouncer: %w", err))
			}
			atExit = func() { stop(); _ = srv.Remove() }
			*store = via
			fmt.Println("PgBouncer in session mode in front of it: each pg-queue borrows a server connection that is already open")
		}
	}
	if *viaAgent {
		if *store == "" {
			fail(fmt.Errorf("-agent needs a PostgreSQL store (-postgres or -store)"))
		}
		stop := atExit
		// The agent leaves when its socket goes.
		atExit = func() { os.RemoveAll(filepath.Join(root, "run")); stop() }
		// The first call starts the agent; it is not part of the cycles.
		_, code, first := run(root, "agent-start", "", "add", "first")
		_, code2, warm := run(root, "agent-start", "", "add", "second")
		if code != 0 || code2 != 0 {
			fail(fmt.Errorf("add through the agent: exit %d, %d", code, code2))
		}
		fmt.Printf("through the host's store agent: the first call (it starts the agent) took %.2f ms, the next %.2f ms\n", ms(first), ms(warm))
	}
	where := "the team directory"
	if *store != "" {
		where = "the store of -store"
		if runs("finished") {
			fail(fmt.Errorf("the finished scenario writes team files: leave it out with -store (-scenarios)"))
		}
	}
	fmt.Printf("pg-queue benchmark: %s, a fresh process per call, team state in %s\n", *bin, where)
	fmt.Printf("%-34s %8s %8s %8s %8s %8s %8s\n", "scenario (claim+complete cycle)", "cycles", "p50 ms", "p99 ms", "claim50", "compl50", "cpu50")

	if runs("version") {
		floor := measureVersion(root)
		fmt.Printf("%-34s %8d %8.2f %8.2f %8s %8s %8s\n", "one process (pg-queue --version)", len(floor), pct(floor, 50), pct(floor, 99), "-", "-", "-")
	}

	for _, syncMode := range strings.Split(*modes, ",") {
		syncFlag = syncMode
		if *store == "" {
			fmt.Printf("-- queue_sync=%s\n", syncFlag)
		}
		for _, s := range strings.Split(*sizes, ",") {
			if !runs("sizes") {
				break
			}
			var live int
			fmt.Sscan(s, &live)
			n := *cycles
			if live >= 100000 && *store == "" {
				n = min(n, 40) // a cycle at 100k live tasks in files takes a third of a second
			}
			team := fmt.Sprintf("live%d-%s", live, syncFlag)
			t0 := time.Now()
			addTasks(root, team, "t", live)
			fmt.Fprintf(os.Stderr, "queuebench: added %d tasks in %.1fs\n", live, time.Since(t0).Seconds())
			report(fmt.Sprintf("%d live tasks", live), runCycles(root, team, n))
		}

		// 100,000 finished tasks (archived, as the queue leaves them)
		// next to 1,000 live ones, 500 of them recently finished.
		if runs("finished") {
			team := "finished100k-" + syncFlag
			seedFinished(root, team, 100000, 500, 1000)
			report("1000 live + 100000 finished", runCycles(root, team, *cycles))
		}

		if runs("concurrent") {
			team := "concurrent-" + syncFlag
			addTasks(root, team, "c", 1000)
			done, elapsed, errs := runConcurrent(root, team, *workers, *dur)
			fmt.Printf("%d concurrent workers, 1000 live tasks: %d cycles in %.1fs = %.0f cycles/s (%d errors)\n",
				*workers, done, elapsed.Seconds(), float64(done)/elapsed.Seconds(), errs)
		}
	}
}

// atExit undoes what the benchmark started (its server).
var atExit = func() {}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "queuebench:", err)
	atExit()
	os.Exit(1)
}

func env(root, team string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "POWERGLIDE_") {
			out = append(out, kv)
		}
	}
	out = append(out, "POWERGLIDE_HOME="+root, "POWERGLIDE_TEAM="+team, "XDG_CONFIG_HOME="+filepath.Join(root, "config"), "POWERGLIDE_QUEUE_SYNC="+syncFlag)
	if *store != "" {
		out = append(out, "POWERGLIDE_STORE="+*store)
		if *viaAgent {
			out = append(out, "POWERGLIDE_STORE_AGENT=auto")
		} else {
			out = append(out, "POWERGLIDE_STORE_AGENT=off")
		}
	}
	return out
}

// cpuLast is the CPU time (user+system) of the last call run.
var cpuLast time.Duration

// run runs pg-queue and returns its stdout, exit code and duration; the
// CPU time it used is left in cpuLast.
func run(root, team, stdin string, args ...string) ([]byte, int, time.Duration) {
	c := exec.Command(*bin, args...)
	c.Env = env(root, team)
	c.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	c.Stdout = &out
	c.Stderr = os.Stderr
	start := time.Now()
	err := c.Run()
	d := time.Since(start)
	if c.ProcessState != nil {
		cpuLast = c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return out.Bytes(), ee.ExitCode(), d
	}
	if err != nil {
		fail(err)
	}
	return out.Bytes(), 0, d
}

func measureVersion(root string) []time.Duration {
	var ds []time.Duration
	for i := 0; i < 100; i++ {
		_, _, d := run(root, "x", "", "--version")
		ds = append(ds, d)
	}
	return ds
}

func taskLine(id string, i int) string {
	return fmt.Sprintf(`{"id":"%s","title":"task %d","prompt":"Fix the bug described in issue %d and make the tests pass.","labels":{"area":"bench"},"verify":"go test ./..."}`, id, i, i)
}

func addTasks(root, team, prefix string, n int) {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(taskLine(fmt.Sprintf("%s%d", prefix, i), i))
		b.WriteByte('\n')
	}
	if _, code, _ := run(root, team, b.String(), "add", "-"); code != 0 {
		fail(fmt.Errorf("add %d tasks: exit %d", n, code))
	}
}

// seedFinished writes a queue as pg-queue leaves it after `finished` tasks
// were done: the oldest archived, the last `recent` still in
// task-queue.json, plus `pending` pending tasks.
func seedFinished(root, team string, finished, recent, pending int) {
	dir := filepath.Join(root, "teams", team)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(err)
	}
	now := time.Now().UTC()
	done := func(i int) []byte {
		t := protocol.Task{ID: fmt.Sprintf("f%d", i), Title: fmt.Sprintf("task %d", i), Prompt: "Fix the bug described in the issue and make the tests pass.",
			Status: protocol.StatusDone, DependsOn: []string{}, Labels: map[string]string{"area": "bench"}, Verify: "go test ./...",
			Attempts: 1, MaxAttempts: 3, Claim: &protocol.Claim{Worker: "w1", Token: int64(i + 1), Until: now},
			Result: json.RawMessage(`{"commit":"0123456789abcdef"}`), CreatedAt: now, UpdatedAt: now}
		b, _ := json.Marshal(t)
		return b
	}
	var arch bytes.Buffer
	for i := 0; i < finished-recent; i++ {
		arch.Write(done(i))
		arch.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "task-archive.jsonl"), arch.Bytes(), 0o644); err != nil {
		fail(err)
	}
	var q bytes.Buffer
	fmt.Fprintf(&q, `{"type":"task-queue","version":1,"generation":1,"next_token":%d,"updated_at":%q,"archived":{"done":%d},"finished_deps":{},"tasks":[`,
		finished+1, now.Format(time.RFC3339Nano), finished-recent)
	for i := finished - recent; i < finished; i++ {
		q.WriteString("\n")
		q.Write(done(i))
		q.WriteString(",")
	}
	for i := 0; i < pending; i++ {
		t := protocol.Task{ID: fmt.Sprintf("p%d", i), Title: fmt.Sprintf("task %d", i), Status: protocol.StatusPending,
			DependsOn: []string{}, Labels: map[string]string{}, MaxAttempts: 3, CreatedAt: now, UpdatedAt: now}
		b, _ := json.Marshal(t)
		q.WriteString("\n")
		q.Write(b)
		if i < pending-1 {
			q.WriteString(",")
		}
	}
	q.WriteString("\n]}\n")
	if err := os.WriteFile(filepath.Join(dir, "task-queue.json"), q.Bytes(), 0o644); err != nil {
		fail(err)
	}
	// The first call reads the whole file and writes the index; it is
	// not measured.
	if _, code, _ := run(root, team, "", "stats"); code != 0 {
		fail(fmt.Errorf("stats: exit %d", code))
	}
}

type sample struct{ claim, complete, cpu time.Duration }

func cycle(root, team, worker string) (sample, bool) {
	out, code, dc := run(root, team, "", "claim", "--worker", worker)
	cpu := cpuLast
	if code == 3 {
		return sample{}, false
	}
	if code != 0 {
		fail(fmt.Errorf("claim: exit %d", code))
	}
	var t protocol.Task
	if err := json.Unmarshal(out, &t); err != nil {
		fail(err)
	}
	_, code, dd := run(root, team, "", "complete", t.ID, "--token", fmt.Sprint(t.Claim.Token))
	if code != 0 {
		fail(fmt.Errorf("complete: exit %d", code))
	}
	return sample{dc, dd, cpu + cpuLast}, true
}

func runCycles(root, team string, n int) []sample {
	cycle(root, team, "warm") // the first call may rebuild the index
	var ss []sample
	for i := 0; i < n; i++ {
		s, ok := cycle(root, team, "w1")
		if !ok {
			break
		}
		ss = append(ss, s)
	}
	return ss
}

func report(name string, ss []sample) {
	var tot, cl, co, cpu []time.Duration
	for _, s := range ss {
		tot = append(tot, s.claim+s.complete)
		cl = append(cl, s.claim)
		co = append(co, s.complete)
		cpu = append(cpu, s.cpu)
	}
	fmt.Printf("%-34s %8d %8.2f %8.2f %8.2f %8.2f %8.2f\n", name, len(ss), pct(tot, 50), pct(tot, 99), pct(cl, 50), pct(co, 50), pct(cpu, 50))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return float64(s[i].Microseconds()) / 1000
}

func runConcurrent(root, team string, workers int, d time.Duration) (int64, time.Duration, int64) {
	var done, errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("w", w)
			for time.Now().Before(deadline) {
				out, code, _ := run(root, team, "", "claim", "--worker", name)
				if code == 3 {
					return // every task is done
				}
				if code != 0 {
					errs.Add(1)
					continue
				}
				var t protocol.Task
				if json.Unmarshal(out, &t) != nil {
					errs.Add(1)
					continue
				}
				if _, code, _ := run(root, team, "", "complete", t.ID, "--token", fmt.Sprint(t.Claim.Token)); code != 0 {
					errs.Add(1)
					continue
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	return done.Load(), time.Since(start), errs.Load()
}
