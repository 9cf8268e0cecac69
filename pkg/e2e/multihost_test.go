package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/dial"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// The multi-host test's timing. A worker beats every mhHeartbeat and
// renews its lease with the beat; a host that dies stops renewing, and its
// tasks are claimable again at most mhLease later. Workers whose heartbeat
// is older than mhStale show as stale. Each renewal is a pg-queue process,
// slow to start when race-built (over a second at load 2), so the beats
// are a second apart. A monitor only stops its own host's workers, after
// mhMonitorStale: long, so a loaded machine causes no false kill.
const (
	mhLease        = "6s"
	mhHeartbeat    = "1s"
	mhStale        = "5s"
	mhMonitorStale = "30s"
	mhTeam         = "mh"
)

// TestMultiHost runs one team on three hosts that share a PostgreSQL
// store: each host is a network namespace of its own (and a UTS namespace
// for its hostname, and a pid namespace) with its own POWERGLIDE_HOME, running pg-monitor
// with two pg-loop workers on a fake model; the server listens on a veth
// address in the root namespace, reachable from all three. The team has 30
// tasks with dependencies. Mid-run, while host h2's workers hold claims,
// h2 is killed whole (every process SIGKILLed, then its link deleted).
// h2 and h3 share one hostname, as cloned machines do: their monitors
// tell them apart by the records' host_id, and leave each other's workers
// alone.
//
// The operator's commands are those of README.md's "Across machines": a
// database made with psql, pg-queue init, pg-queue add, and on each host
// pg-monitor run --worker-prefix.
//
// It shows: every task done exactly once; the tasks h2 held were finished
// by the other hosts' workers after their leases expired (journaled as
// expired, then claimed again); pg-dash and
// pg-monitor status, reading the store from outside the hosts, show h2's
// workers as stale; no monitor acted on another host's worker; and the
// surviving workers and monitors end with <POWERGLIDE_DONE>.
func TestMultiHost(t *testing.T) {
	lab := newLab(t, 3)
	lab.Names[1], lab.Names[2] = "twin", "twin"
	srv := pgtest.Start(t, pgtest.Options{Listen: lab.DB})
	dir := t.TempDir()
	doubles, err := filepath.Abs(filepath.Join("..", "..", "testdata", "loop-doubles"))
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "model")
	if err := os.WriteFile(model, []byte(mhModel), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The operator's side (the root namespace), as README.md's "Across
	// machines" goes: a database, the schema, the tasks.
	if _, err := exec.LookPath("psql"); err != nil {
		needRealPart(t, "the multi-host test needs psql (PostgreSQL's client; scripts/test-deps.sh installs it)")
	}
	url := srv.URL("powerglide")
	op := mhEnv(dir, "operator", url, doubles)
	mhRun(t, op, "", "psql", srv.URL("postgres"), "-c", "CREATE DATABASE powerglide")
	mhRun(t, op, "", "pg-queue", "init")
	tasks := mhTasks()
	var in strings.Builder
	for _, k := range tasks {
		b, _ := json.Marshal(k)
		in.Write(b)
		in.WriteByte('\n')
	}
	mhRun(t, op, in.String(), "pg-queue", "--team", mhTeam, "add", "-")

	st, err := dial.Open(url, filepath.Join(dir, "operator"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	team, err := st.Team(mhTeam)
	if err != nil {
		t.Fatal(err)
	}

	// Every host: its pg-monitor with two workers named after the host.
	started := time.Now()
	type host struct {
		cmd      *exec.Cmd
		out, err bytes.Buffer
		home     string
		done     chan error
	}
	hosts := make([]*host, len(lab.Hosts))
	for i, name := range lab.Hosts {
		h := &host{home: filepath.Join(dir, name, ".powerglide"), done: make(chan error, 1)}
		h.cmd = lab.Command(ctx, i, "pg-monitor", "run", "--team", mhTeam, "--workers", "2", "--worker-prefix", name+"-",
			"--interval", "250ms", "--stale", mhMonitorStale, "--grace", "1s", "--backoff", "200ms",
			"--", "pg-loop", "--team", mhTeam, "--llm-serve", "sh "+model+" serve", "--tools-serve", "fake-tool serve",
			"--heartbeat", mhHeartbeat, "--lease", mhLease)
		h.cmd.Env = mhEnv(dir, name, url, doubles)
		h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.err
		if err := h.cmd.Start(); err != nil {
			t.Fatalf("start host %s: %v", name, err)
		}
		go func() { h.done <- h.cmd.Wait() }()
		hosts[i] = h
	}
	dump := func() {
		for i, h := range hosts {
			t.Logf("host %s: pg-monitor stdout:\n%s\nstderr:\n%s", lab.Hosts[i], h.out.String(), h.err.String())
			logs, _ := filepath.Glob(filepath.Join(h.home, "teams", mhTeam, "logs", "*.stderr"))
			for _, f := range logs {
				if b, _ := os.ReadFile(f); len(b) > 0 {
					t.Logf("%s:\n%s", f, b)
				}
			}
		}
	}

	// Mid-run: once both of h2's workers hold a claim and a few tasks are
	// done, h2 dies whole.
	const victim = 1
	vprefix := lab.Hosts[victim] + "-"
	var held []protocol.Task
	for {
		if ctx.Err() != nil {
			dump()
			t.Fatalf("host %s never held two claims mid-run", lab.Hosts[victim])
		}
		all, err := team.Tasks().List(queue.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		done, claims := 0, map[string]bool{}
		for _, k := range all {
			if k.Status == protocol.StatusDone {
				done++
			}
			if k.Status == protocol.StatusClaimed && strings.HasPrefix(k.Claim.Worker, vprefix) {
				claims[k.Claim.Worker] = true
			}
		}
		if done >= 4 && len(claims) == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	killedAt := time.Now()
	n := lab.KillAll(victim)
	if err := lab.Cut(victim); err != nil {
		t.Fatal(err)
	}
	if err := <-hosts[victim].done; err == nil {
		t.Errorf("host %s: pg-monitor survived its host's death", lab.Hosts[victim])
	}
	// What the dead host held: its processes are gone, so nothing of it
	// changes any more.
	all, err := team.Tasks().List(queue.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range all {
		if k.Status == protocol.StatusClaimed && strings.HasPrefix(k.Claim.Worker, vprefix) {
			held = append(held, k)
		}
	}
	t.Logf("killed host %s (%d processes) %.1fs into the run, holding %s", lab.Hosts[victim], n, killedAt.Sub(started).Seconds(), taskIDs(held))
	if len(held) == 0 {
		t.Fatalf("host %s held no claim when it was killed", lab.Hosts[victim])
	}
	if lab.Reaches(victim, net.JoinHostPort(lab.DB, mhPort(t, url))) {
		t.Errorf("host %s still reaches the server after its link was cut", lab.Hosts[victim])
	}
	if !lab.Reaches(0, net.JoinHostPort(lab.DB, mhPort(t, url))) {
		t.Errorf("host %s does not reach the server", lab.Hosts[0])
	}

	// The survivors drain the queue.
	for i, h := range hosts {
		if i == victim {
			continue
		}
		select {
		case err := <-h.done:
			if err != nil {
				dump()
				t.Fatalf("host %s: pg-monitor: %v", lab.Hosts[i], err)
			}
		case <-ctx.Done():
			dump()
			t.Fatalf("host %s: pg-monitor still running after %v", lab.Hosts[i], time.Since(killedAt))
		}
		if last := lastLine(h.out.String()); last != "<POWERGLIDE_DONE>" {
			t.Errorf("host %s: pg-monitor's last line is %q, want <POWERGLIDE_DONE>", lab.Hosts[i], last)
		}
		for w := 1; w <= 2; w++ {
			log := filepath.Join(h.home, "teams", mhTeam, "logs", fmt.Sprintf("worker-%s-%d.jsonl", lab.Hosts[i], w))
			b, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			if last := lastLine(string(b)); last != "<POWERGLIDE_DONE>" {
				t.Errorf("%s ends with %q, want <POWERGLIDE_DONE>", log, last)
			}
		}
	}
	t.Logf("the survivors drained the queue %.1fs after the kill", time.Since(killedAt).Seconds())

	// No tool of the surviving hosts reported a data race or a panic.
	for i, h := range hosts {
		if i == victim {
			continue
		}
		logs, _ := filepath.Glob(filepath.Join(h.home, "teams", mhTeam, "logs", "*.stderr"))
		for _, f := range append(logs, "") {
			b := h.err.Bytes()
			if f != "" {
				b, _ = os.ReadFile(f)
			}
			if bytes.Contains(b, []byte("DATA RACE")) || bytes.Contains(b, []byte("panic:")) {
				t.Errorf("host %s: a data race or a panic in %s:\n%s", lab.Hosts[i], cmp.Or(f, "pg-monitor's stderr"), b)
			}
		}
	}

	// Every task done, once, with its own answer.
	all, err = team.Tasks().List(queue.ListOptions{Archived: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(tasks) {
		t.Errorf("%d tasks in the store, want %d", len(all), len(tasks))
	}
	for _, k := range all {
		if k.Status != protocol.StatusDone {
			t.Errorf("task %s is %s, want done", k.ID, k.Status)
		}
		if !bytes.Contains(k.Result, []byte(`"finished `+k.ID+`"`)) {
			t.Errorf("task %s: result %s, want the model's answer finished %s", k.ID, k.Result, k.ID)
		}
	}
	ev := mhJournal(t, team, tasks)
	completes := map[string][]protocol.TaskEvent{}
	claims := map[string][]protocol.TaskEvent{}
	expires := map[string][]protocol.TaskEvent{}
	doneAt := map[string]int{}
	for i, e := range ev.tasks {
		switch e.Op {
		case "complete":
			completes[e.Task] = append(completes[e.Task], e)
			doneAt[e.Task] = i
		case "claim":
			claims[e.Task] = append(claims[e.Task], e)
		case "expire":
			expires[e.Task] = append(expires[e.Task], e)
		}
	}
	for _, k := range tasks {
		if c := completes[k.ID]; len(c) != 1 {
			t.Errorf("task %s completed %d times in the journal, want once", k.ID, len(c))
		}
	}
	// No claim before the claimed task's dependencies were done.
	for i, e := range ev.tasks {
		if e.Op != "claim" {
			continue
		}
		for _, k := range tasks {
			if k.ID != e.Task {
				continue
			}
			for _, d := range k.DependsOn {
				if at, ok := doneAt[d]; !ok || at > i {
					t.Errorf("task %s claimed by %s before its dependency %s was done", e.Task, e.Worker, d)
				}
			}
		}
	}

	// The dead host's tasks: finished by the others, claimed again only
	// after the dead host's lease ran out.
	for _, k := range held {
		c := completes[k.ID]
		if len(c) != 1 {
			continue // reported above
		}
		if strings.HasPrefix(c[0].Worker, vprefix) {
			t.Errorf("task %s, held by the dead host, completed by its worker %s", k.ID, c[0].Worker)
		}
		cl := claims[k.ID]
		if len(cl) < 2 {
			t.Errorf("task %s, held by the dead host, claimed %d times, want again after its lease", k.ID, len(cl))
			continue
		}
		last := cl[len(cl)-1]
		if last.Worker != c[0].Worker {
			t.Errorf("task %s: last claimed by %s but completed by %s", k.ID, last.Worker, c[0].Worker)
		}
		if x := expires[k.ID]; len(x) == 0 || x[0].Worker != k.Claim.Worker || x[0].Token != k.Claim.Token {
			t.Errorf("task %s: expire events %+v, want the first to end the dead host's lease (worker %s, token %d)", k.ID, x, k.Claim.Worker, k.Claim.Token)
		}
		if last.TS.Before(k.Claim.Until) {
			t.Errorf("task %s: claimed again by %s at %s, before the dead host's lease ran out at %s",
				k.ID, last.Worker, last.TS.Format(time.RFC3339Nano), k.Claim.Until.Format(time.RFC3339Nano))
		}
		t.Logf("task %s: held by %s until %s, claimed by %s %.1fs after the kill, completed",
			k.ID, k.Claim.Worker, k.Claim.Until.Format("15:04:05.000"), last.Worker, last.TS.Sub(killedAt).Seconds())
	}

	// No monitor signalled or released another host's worker: the dead
	// host's workers were only left to their leases, and the twins left
	// each other alone. No worker of the run is stale for mhMonitorStale
	// or dies while its host lives, so no monitor acts at all.
	for _, m := range ev.monitor {
		if strings.HasPrefix(m.Worker, vprefix) && m.TS.After(killedAt) {
			t.Errorf("a monitor acted on the dead host's worker %s after its death: %s %s", m.Worker, m.Action, m.Reason)
		} else {
			t.Errorf("a monitor acted on worker %s: %s %s", m.Worker, m.Action, m.Reason)
		}
	}
	// The twins' records: one host name, two host ids.
	recs, errs := team.Workers().List(ctx)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	ids := map[string]string{}
	for _, r := range recs {
		host := strings.SplitN(r.Worker, "-", 2)[0]
		if r.HostID == "" || (ids[host] != "" && ids[host] != r.HostID) {
			t.Errorf("worker %s of host %s: host_id %q, want one id per host", r.Worker, host, r.HostID)
		}
		ids[host] = r.HostID
	}
	if ids["h2"] == ids["h3"] || ids["h1"] == ids["h2"] {
		t.Errorf("hosts share a host_id: %v", ids)
	}

	// From outside the hosts, the dashboard and the monitor see the dead
	// host's workers as stale, the others' as finished.
	out := mhRun(t, op, "", "pg-dash", "--store", url, "--team", mhTeam, "--once", "--json", "--stale", mhStale)
	var snap struct {
		Workers []struct {
			Worker string `json:"worker"`
			Host   string `json:"host"`
			Stale  bool   `json:"stale"`
			State  string `json:"state"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(out), &snap); err != nil {
		t.Fatalf("pg-dash --once --json: %v\n%s", err, out)
	}
	var seen []string
	for _, w := range snap.Workers {
		seen = append(seen, w.Worker)
		wantHost := lab.Names[slices.Index(lab.Hosts, strings.SplitN(w.Worker, "-", 2)[0])]
		if w.Host != wantHost {
			t.Errorf("pg-dash: worker %s on host %q, want %q", w.Worker, w.Host, wantHost)
		}
		if dead := strings.HasPrefix(w.Worker, vprefix); w.Stale != dead {
			t.Errorf("pg-dash: worker %s (state %s) stale=%v, want %v", w.Worker, w.State, w.Stale, dead)
		}
	}
	slices.Sort(seen)
	if want := []string{"h1-1", "h1-2", "h2-1", "h2-2", "h3-1", "h3-2"}; !slices.Equal(seen, want) {
		t.Errorf("pg-dash shows workers %v, want %v", seen, want)
	}
	text := mhRun(t, op, "", "pg-dash", "--store", url, "--team", mhTeam, "--once", "--stale", mhStale)
	t.Logf("pg-dash --once:\n%s", text)
	out = mhRun(t, op, "", "pg-monitor", "status", "--store", url, "--team", mhTeam, "--stale", mhStale, "--json")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var s protocol.WorkerStatus
		if err := json.Unmarshal([]byte(line), &s); err != nil || s.Type != "worker_status" {
			continue
		}
		if dead := strings.HasPrefix(s.Worker, vprefix); dead != (s.Liveness == "stale") {
			t.Errorf("pg-monitor status: worker %s is %s (%s)", s.Worker, s.Liveness, s.Reason)
		}
	}
	if t.Failed() {
		dump()
	}
}

// mhPort is the port of a postgres:// URL.
func mhPort(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Port()
}

// mhModel stands in for pg-llm serve on every worker: each task is one
// turn that takes a little while and answers "finished <task>".
const mhModel = `# pg-llm serve's protocol: one turn a task, answered "finished <id>".
usage='"usage":{"input_tokens":100,"output_tokens":20,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0.01}'
while IFS= read -r req; do
	id=$(printf '%s' "$req" | sed -n 's/^{"id":"\([^"]*\)".*/\1/p')
	task=$(printf '%s' "$req" | grep -o 'do task [a-z0-9]*' | head -n 1 | cut -d' ' -f3)
	sleep 0.3
	printf '{"id":"%s","type":"start","provider":"fake","model":"fake/model"}\n' "$id"
	printf '{"id":"%s","type":"text","text":"finished %s"}\n' "$id" "$task"
	printf '{"id":"%s","type":"end","stop_reason":"end_turn","message":{"role":"assistant","content":[{"type":"text","text":"finished %s"}]},%s}\n' "$id" "$task" "$usage"
done
`

// mhTasks is a graph of 30 tasks, four levels deep: a01..a10; b_i after
// a_i and a_i+1; c_i after b_i and b_i+1; z after every c.
func mhTasks() []protocol.Task {
	var out []protocol.Task
	add := func(id string, deps ...string) {
		out = append(out, protocol.Task{ID: id, Title: "task " + id, Prompt: "do task " + id, DependsOn: deps})
	}
	for i := 1; i <= 10; i++ {
		add(fmt.Sprintf("a%02d", i))
	}
	for i := 1; i <= 10; i++ {
		add(fmt.Sprintf("b%02d", i), fmt.Sprintf("a%02d", i), fmt.Sprintf("a%02d", i%10+1))
	}
	var cs []string
	for i := 1; i <= 9; i++ {
		c := fmt.Sprintf("c%02d", i)
		add(c, fmt.Sprintf("b%02d", i), fmt.Sprintf("b%02d", i+1))
		cs = append(cs, c)
	}
	add("z", cs...)
	return out
}

// mhEnv is the environment of one host's (or the operator's) processes:
// a home of its own, the store, the loop doubles on PATH, no model keys.
// A race-built tool waits a second before it exits, to let other
// goroutines' races be reported (GORACE atexit_sleep_ms); the test's
// hundreds of pg-queue processes skip that wait, and the test looks for
// reports in the logs instead.
func mhEnv(dir, name, url, doubles string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "POWERGLIDE_") || strings.HasPrefix(k, "PG") || strings.HasSuffix(k, "_API_KEY") || strings.HasSuffix(k, "_BASE_URL") ||
			k == "HOME" || k == "XDG_CONFIG_HOME" || k == "PATH" || k == "GORACE" {
			continue
		}
		env = append(env, kv)
	}
	home := filepath.Join(dir, name)
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"POWERGLIDE_HOME="+filepath.Join(home, ".powerglide"), "POWERGLIDE_STORE="+url,
		"PATH="+doubles+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

// mhRun runs a tool in the root namespace and returns its stdout.
func mhRun(t *testing.T, env []string, stdin string, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// mhEvents are the journal's task and monitor records, in order.
type mhEvents struct {
	tasks   []protocol.TaskEvent
	monitor []protocol.MonitorEvent
}

// mhJournal reads the whole journal: every record there is when it is
// called. It has them all once it has read a complete of each task (the
// claims and expiries of a task come before its complete) and then nothing
// new for a second; a pause before that is a slow read, not the end.
func mhJournal(t *testing.T, team store.Team, tasks []protocol.Task) mhEvents {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := team.Journal().Follow(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ev mhEvents
	incomplete := map[string]bool{}
	for _, k := range tasks {
		incomplete[k.ID] = true
	}
	for {
		next, cancelNext := context.WithTimeout(ctx, time.Second)
		line, err := f.Next(next)
		cancelNext()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			if len(incomplete) == 0 {
				return ev
			}
			continue
		}
		if err != nil {
			t.Fatalf("read the journal: %v (no complete yet of %d tasks)", err, len(incomplete))
		}
		var head struct{ Type string }
		if err := json.Unmarshal(line, &head); err != nil {
			t.Fatalf("journal record %s: %v", line, err)
		}
		switch head.Type {
		case protocol.JournalTask:
			var e protocol.TaskEvent
			if err := json.Unmarshal(line, &e); err != nil {
				t.Fatal(err)
			}
			ev.tasks = append(ev.tasks, e)
			if e.Op == "complete" {
				delete(incomplete, e.Task)
			}
		case protocol.JournalMonitor:
			var e protocol.MonitorEvent
			if err := json.Unmarshal(line, &e); err != nil {
				t.Fatal(err)
			}
			if e.Worker != "" && (e.Action == "sigterm" || e.Action == "sigkill" || e.Action == "release") {
				ev.monitor = append(ev.monitor, e)
			}
		}
	}
}

func lastLine(s string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	return last
}

func taskIDs(ts []protocol.Task) string {
	var ids []string
	for _, k := range ts {
		ids = append(ids, k.ID+" ("+k.Claim.Worker+")")
	}
	return strings.Join(ids, ", ")
}
