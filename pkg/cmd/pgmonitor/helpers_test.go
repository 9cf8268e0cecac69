package pgmonitor_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgmonitor"
	"github.com/powerglide/powerglide/pkg/internal/testenv"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/workermark"
)

// Script workers run `pg-monitor beat` many times a second and tests start
// `pg-monitor watch` processes: TestMain builds pg-monitor into a bin
// directory on PATH (a race-built binary takes over a second to start on a
// loaded machine, longer than the heartbeat limit), and pg-queue for the
// tests against the real queue. A binary that does not build fails the
// tests: skipping them, or running something else in its place, would
// hide it.
func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	bin, err := os.MkdirTemp("", "pgmonitor-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bin)
	for _, tool := range []string{"pg-monitor", "pg-queue"} {
		// go test puts $GOROOT/bin first on PATH.
		build := exec.Command("go", "build", "-o", filepath.Join(bin, tool), "github.com/powerglide/powerglide/cmd/"+tool)
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", tool, err, out)
			return 1
		}
	}
	realQueue = filepath.Join(bin, "pg-queue")
	os.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return m.Run()
}

var (
	testdata     = filepath.Join("..", "..", "..", "testdata", "monitor")
	fakeQueue, _ = filepath.Abs(filepath.Join(testdata, "fake-pg-queue"))
	workerSh, _  = filepath.Abs(filepath.Join(testdata, "worker.sh"))
	realQueue    string // the built pg-queue
)

// queues are the two queues the main scenarios run against: the shell
// double and the real pg-queue.
var queues = []string{"fake", "pg-queue"}

type team struct {
	t    *testing.T
	qcmd string // the queue command
	home string
	name string
	dir  teamdir.Dir
	env  []string
}

func newTeam(t *testing.T, tasks ...string) *team { return newTeamWith(t, "fake", tasks...) }

// newTeamWith makes a team whose queue is the double ("fake") or the real
// pg-queue ("pg-queue"); tasks are added with their names as ids.
func newTeamWith(t *testing.T, queue string, tasks ...string) *team {
	t.Helper()
	testenv.Need(t, "the script workers need it; scripts/test-deps.sh installs it", "jq", "flock")
	qcmd := fakeQueue
	if queue == "pg-queue" {
		qcmd = realQueue
	}
	home := t.TempDir()
	tm := &team{t: t, qcmd: qcmd, home: home, name: "t1", dir: teamdir.Dir{Home: home, Team: "t1"}}
	tm.env = append(os.Environ(),
		"POWERGLIDE_HOME="+home, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"POWERGLIDE_QUEUE_CMD="+qcmd, "QUEUE="+qcmd, "POWERGLIDE_TEAM=", "POWERGLIDE_WORKER=")
	if err := tm.dir.Ensure(); err != nil {
		t.Fatal(err)
	}
	for _, id := range tasks {
		if qcmd == fakeQueue {
			tm.queue("add", id)
		} else {
			tm.queue("add", "--id", id, id)
		}
	}
	return tm
}

// releases counts the releases the queue saw, from its own records.
func (tm *team) releases() int {
	tm.t.Helper()
	if tm.qcmd == fakeQueue {
		b, _ := os.ReadFile(tm.dir.Path() + "/releases.log")
		return strings.Count(string(b), "\n")
	}
	b, _ := os.ReadFile(tm.dir.Events())
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"type":"task"`) && strings.Contains(line, `"op":"release"`) {
			n++
		}
	}
	return n
}

// queue runs the queue double.
func (tm *team) queue(args ...string) string {
	tm.t.Helper()
	cmd := exec.Command(tm.qcmd, append([]string{"--team", tm.name}, args...)...)
	cmd.Env = tm.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		tm.t.Fatalf("queue %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (tm *team) tasks(status string) []protocol.Task {
	tm.t.Helper()
	var out []protocol.Task
	for _, line := range strings.Split(strings.TrimSpace(tm.queue("list", "--status", status)), "\n") {
		if line == "" {
			continue
		}
		var task protocol.Task
		if err := json.Unmarshal([]byte(line), &task); err != nil {
			tm.t.Fatal(err)
		}
		out = append(out, task)
	}
	return out
}

// run runs pg-monitor in-process.
func (tm *team) run(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = cli.Run(ctx, pgmonitor.Spec(), append([]string{"--team", tm.name}, args...), cli.Test(nil, &o, &e, tm.env...))
	return code, o.String(), e.String()
}

// start runs pg-monitor as a process.
func (tm *team) start(args ...string) (*exec.Cmd, *bytes.Buffer) {
	tm.t.Helper()
	cmd := exec.Command("pg-monitor", append([]string{"--team", tm.name}, args...)...)
	cmd.Env = tm.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tm.t.Fatal(err)
	}
	return cmd, &out
}

// spawn starts a process in its own process group, as cron would start a
// worker, and reaps it in the background.
func (tm *team) spawn(worker string, argv ...string) *exec.Cmd {
	tm.t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append([]string{}, tm.env...), "POWERGLIDE_TEAM="+tm.name, "POWERGLIDE_WORKER="+worker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tm.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	tm.t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	// The process this test started is the team's worker, and carries
	// the mark pg-monitor run gives the workers it spawns.
	start, err := proc.StartTime(cmd.Process.Pid)
	if err == nil {
		err = workermark.Make(tm.home, cmd.Process.Pid, start, workermark.Mark{Team: tm.name, Worker: worker, HostID: proc.ThisHost().ID})
	}
	if err != nil {
		tm.t.Fatal(err)
	}
	return cmd
}

func (tm *team) events() []protocol.MonitorEvent {
	tm.t.Helper()
	f, err := os.Open(tm.dir.Events())
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		tm.t.Fatal(err)
	}
	defer f.Close()
	var out []protocol.MonitorEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev protocol.MonitorEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			tm.t.Fatalf("events.jsonl: %v: %s", err, sc.Text())
		}
		if ev.Type == protocol.JournalMonitor {
			out = append(out, ev)
		}
	}
	return out
}

// workerEvents are the journal's worker events of one op, in order.
func (tm *team) workerEvents(op string) []protocol.WorkerEvent {
	tm.t.Helper()
	b, err := os.ReadFile(tm.dir.Events())
	if err != nil {
		tm.t.Fatal(err)
	}
	var out []protocol.WorkerEvent
	for _, line := range strings.Split(string(b), "\n") {
		var ev protocol.WorkerEvent
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == protocol.JournalWorker && ev.Op == op {
			out = append(out, ev)
		}
	}
	return out
}

func (tm *team) count(action, worker string) int {
	n := 0
	for _, ev := range tm.events() {
		if ev.Action == action && (worker == "" || ev.Worker == worker) {
			n++
		}
	}
	return n
}

func (tm *team) dump() {
	b, _ := os.ReadFile(tm.dir.Events())
	tm.t.Logf("events.jsonl:\n%s", b)
}

// waitFor polls cond; the timeouts are generous because the machine running
// the tests may be loaded.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && !bytes.HasPrefix(bytes.TrimSpace(b[i+1:]), []byte("Z"))
}

// short are the limits every test uses. The heartbeat limit leaves room
// for a loaded machine, where a race-built `pg-monitor beat` is slow to start.
var short = []string{"--heartbeat", "3s", "--interval", "200ms", "--grace", "500ms"}

func (tm *team) statuses() []monitorStatus {
	tm.t.Helper()
	code, out, errs := tm.run(context.Background(), "status", "--json")
	if code != 0 {
		tm.t.Fatalf("status: exit %d: %s", code, errs)
	}
	var sts []monitorStatus
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var s monitorStatus
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			tm.t.Fatal(err)
		}
		sts = append(sts, s)
	}
	return sts
}

type monitorStatus struct {
	Worker   string `json:"worker"`
	Liveness string `json:"liveness"`
	PID      int    `json:"pid"`
	Task     string `json:"task"`
}
