package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgdash"
	"github.com/powerglide/powerglide/pkg/cmd/pgmonitor"
	"github.com/powerglide/powerglide/pkg/ledger"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/dial"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// TestStorePostgres runs testdata/script/store-postgres: the same commands
// as on files (pg-queue, pg-monitor, pg-dash, pg-loop under pg-monitor),
// against a real PostgreSQL server this test starts, each script with a
// database of its own in POWERGLIDE_STORE; then otherHost. Under CI=true
// a server that cannot start fails the test (pgtest).
func TestStorePostgres(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	t.Run("scripts", func(t *testing.T) { storeScripts(t, srv) })
	t.Run("other-host", func(t *testing.T) { otherHost(t, srv.DB(t)) })
	t.Run("hostless-records", func(t *testing.T) { hostlessRecords(t, srv.DB(t)) })
}

func storeScripts(t *testing.T, srv *pgtest.Server) {
	runTestscript(t, withDatabase(withLoopDoubles(t, Params(scriptDir("store-postgres"))), srv, "POWERGLIDE_STORE"))
}

// withDatabase gives every script a database of its own on srv, its URL
// in the environment variable name, and the server's host:port in PG_ADDR.
func withDatabase(p testscript.Params, srv *pgtest.Server, name string) testscript.Params {
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		url, err := srv.CreateDB(ctx)
		if err != nil {
			return err
		}
		env.Setenv(name, url)
		env.Setenv("PG_ADDR", net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port))) // the server, for URLs of other roles and databases
		return nil
	}
	return p
}

// otherHost: a worker record of another host, in the shared store, whose
// heartbeat is old. pg-monitor on this host reports it stale and never
// signals its pid, even though a process of this host has that pid and
// start time; pg-dash shows it stale.
func otherHost(t *testing.T, url string) {
	home := t.TempDir()
	ctx := context.Background()

	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	st, err := proc.ReadStat(child.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	tm := openTeamT(t, url, home)
	old := time.Now().Add(-time.Hour).UTC()
	rec := &protocol.Worker{Worker: "b1", PID: child.Process.Pid, PIDStart: st.Start, PGID: st.PGID, SID: st.SID,
		Host: "another-host", Epoch: 1, State: "executing", HeartbeatAt: old, ProgressAt: old, StartedAt: old, Velocity: 1}
	if err := tm.Workers().Write(ctx, rec); err != nil {
		t.Fatal(err)
	}

	run := func(spec func() *cli.Spec, args ...string) (string, int) {
		var out, errb bytes.Buffer
		io := cli.Test(nil, &out, &errb, "POWERGLIDE_HOME="+home, "HOME="+home, "POWERGLIDE_STORE="+url, "POWERGLIDE_QUEUE_CMD=false")
		code := cli.Run(ctx, spec(), args, io)
		return out.String() + errb.String(), code
	}
	out, code := run(pgmonitor.Spec, "--team", "t", "status", "--json")
	if code != 0 || !strings.Contains(out, `"worker":"b1","liveness":"stale"`) || !strings.Contains(out, `"host":"another-host"`) {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	out, code = run(pgmonitor.Spec, "--team", "t", "watch", "--once", "--grace", "0s")
	if code != 0 || strings.Contains(out, "sigterm") {
		t.Fatalf("watch --once: exit %d\n%s", code, out)
	}
	if !proc.Matches(child.Process.Pid, st.Start) {
		t.Fatal("the process of another host's record was signalled")
	}
	out, code = run(pgdash.Spec, "--team", "t", "--once", "--json")
	if code != 0 {
		t.Fatalf("pg-dash --once: exit %d\n%s", code, out)
	}
	var snap struct {
		Workers []struct {
			Worker string `json:"worker"`
			Stale  bool   `json:"stale"`
			Alive  *bool  `json:"alive"`
			Host   string `json:"host"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(out), &snap); err != nil {
		t.Fatalf("pg-dash --once --json: %v\n%s", err, out)
	}
	if len(snap.Workers) != 1 || !snap.Workers[0].Stale || snap.Workers[0].Alive != nil || snap.Workers[0].Host != "another-host" {
		t.Fatalf("pg-dash shows %+v, want b1 stale, its liveness unknown", snap.Workers)
	}
}

// hostlessRecords: on a store several hosts share, a worker record or a
// budget reservation without host_id (of an older writer, of a host that
// cannot read its id, edited by hand) is no host's, even when it names
// this host or no host at all: this host's pg-monitor must not look its
// pid up in its own /proc, find it gone and release the worker's claim or
// drop the reservation (hostile review F6). Nor does a record whose
// pid_start is not a start time count as gone. Each is left to its lease.
func hostlessRecords(t *testing.T, url string) {
	home := t.TempDir()
	ctx := context.Background()
	// A pid that is gone on this host, with the start time it had.
	child := exec.Command("true")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	gone := child.Process.Pid
	st, err := proc.ReadStat(gone)
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err != nil {
		t.Fatal(err)
	}
	tm := openTeamT(t, url, home)
	now := time.Now().UTC()
	this := proc.ThisHost()
	recs := []*protocol.Worker{
		{Worker: "named", Host: this.Name, PID: gone, PIDStart: st.Start},                            // this host's name, no id
		{Worker: "nameless", PID: gone, PIDStart: st.Start},                                          // no host at all
		{Worker: "malformed", Host: this.Name, HostID: this.ID, PID: gone, PIDStart: "0" + st.Start}, // this host's, pid_start not a start time
	}
	for _, r := range recs {
		r.Epoch, r.State, r.HeartbeatAt, r.ProgressAt, r.StartedAt, r.Velocity = 1, "executing", now, now, now, 1
		if _, err := tm.Tasks().Add([]protocol.Task{{Title: "task of " + r.Worker}}); err != nil {
			t.Fatal(err)
		}
		task, err := tm.Tasks().Claim(r.Worker, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		r.Task = task.ID
		if err := tm.Workers().Write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ledger.SetBudget(ctx, tm, 10, now); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Budget().Update(ctx, func(tb *protocol.TeamBudget) (*protocol.TeamBudget, error) {
		tb.Reservations = append(tb.Reservations, protocol.Reservation{ID: "r-named", Worker: "named", PID: gone, PIDStart: st.Start, Host: this.Name, USD: 1, At: now, Until: now.Add(time.Hour)})
		tb.ReservedUSD = 1
		return tb, nil
	}); err != nil {
		t.Fatal(err)
	}

	run := func(spec func() *cli.Spec, args ...string) (string, int) {
		var out, errb bytes.Buffer
		// The watch releases through pg-queue: this test binary, on PATH.
		io := cli.Test(nil, &out, &errb, "POWERGLIDE_HOME="+home, "HOME="+home, "POWERGLIDE_STORE="+url, "PATH="+os.Getenv("PATH"))
		code := cli.Run(ctx, spec(), args, io)
		return out.String() + errb.String(), code
	}
	out, code := run(pgmonitor.Spec, "--team", "t", "status", "--json")
	if code != 0 || strings.Count(out, `"liveness":"alive"`) != 3 || !strings.Contains(out, `"reserved_usd":1`) {
		t.Fatalf("status: exit %d\n%s, want three live workers and the reservation kept", code, out)
	}
	out, code = run(pgmonitor.Spec, "--team", "t", "watch", "--once")
	if code != 0 || strings.Contains(out, `"action":"release"`) {
		t.Fatalf("watch --once: exit %d\n%s", code, out)
	}
	claimed, err := tm.Tasks().List(queue.ListOptions{Status: []string{"claimed"}})
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claimed tasks after the watch: %v %+v, want all three", err, claimed)
	}
	out, code = run(pgdash.Spec, "--team", "t", "--once", "--json")
	if code != 0 || strings.Contains(out, `"alive":false`) {
		t.Fatalf("pg-dash --once: exit %d\n%s, want no worker shown as gone", code, out)
	}
}

// openTeamT opens team t of the store at url directly, closed when the
// test ends.
func openTeamT(t *testing.T, url, home string) store.Team {
	t.Helper()
	s, err := dial.Open(url, home)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tm, err := s.Team("t")
	if err != nil {
		t.Fatal(err)
	}
	return tm
}
