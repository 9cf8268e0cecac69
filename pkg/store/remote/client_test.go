package remote

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/filestore"
)

// tasksOf is a store whose teams' queues are wrapped by wrap: the fakes
// below change one method of a real queue.
type tasksOf struct {
	store.Store
	wrap func(store.Tasks) store.Tasks
}

func (s tasksOf) Team(name string) (store.Team, error) {
	t, err := s.Store.Team(name)
	if err != nil {
		return nil, err
	}
	return tasksOfTeam{t, s.wrap}, nil
}

type tasksOfTeam struct {
	store.Team
	wrap func(store.Tasks) store.Tasks
}

func (t tasksOfTeam) Tasks() store.Tasks { return t.wrap(t.Team.Tasks()) }

// serve runs Serve on conn in the background until the test ends, and
// waits for it then: a Serve left running past its test (its stop reads
// the test hooks) raced the next test that sets them. The channel closes
// when Serve has returned.
func serve(t *testing.T, ctx context.Context, conn net.Conn, st store.Store) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(ctx, conn, st)
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return done
}

// clientTeam is team "t" of a client on conn, closed when the test ends.
func clientTeam(t *testing.T, conn Conn, o Options) store.Team {
	t.Helper()
	c, err := NewClient(conn, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ct, err := c.Team("t")
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

// fileDirect opens the file store at dir, as a client's direct path.
func fileDirect(dir string) func() (store.Store, error) {
	return func() (store.Store, error) { return filestore.Open(dir, filestore.Options{NoSync: true}), nil }
}

// dyingTasks does the real claim and then cuts the agent's connection
// before the answer goes out: an agent killed (SIGKILL, OOM, SIGTERM, which
// hangs up on its clients) between the commit and the reply.
type dyingTasks struct {
	store.Tasks
	die func()
}

func (q dyingTasks) WaitClaim(ctx context.Context, worker string, lease, wait time.Duration) (*protocol.Task, error) {
	t, err := q.Tasks.WaitClaim(ctx, worker, lease, wait)
	q.die()
	return t, err
}

// TestLostClaimClaimsOnce: a claim that reached the agent, which claimed
// the task and then lost the connection before answering (killed between
// the commit and the reply), leaves one task claimed, not two: the direct
// path adopts the claim made after the send instead of claiming another
// (which would be held until its lease ended, an attempt used, and its
// dependents blocked).
func TestLostClaimClaimsOnce(t *testing.T) {
	dir := t.TempDir()
	st := filestore.Open(dir, filestore.Options{NoSync: true})
	defer st.Close()
	tm, err := st.Team("t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Tasks().Add([]protocol.Task{{Title: "a", MaxAttempts: 1}, {Title: "b", MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	srv, cli := net.Pipe()
	serve(t, context.Background(), srv, tasksOf{st, func(q store.Tasks) store.Tasks { return dyingTasks{q, func() { srv.Close() }} }})
	ct := clientTeam(t, cli, Options{Direct: fileDirect(dir)})
	got, err := ct.Tasks().Claim("w1", time.Minute)
	t.Logf("claim printed %v (err %v)", func() string {
		if got == nil {
			return "nothing"
		}
		return got.Title
	}(), err)
	held, err := tm.Tasks().List(queue.ListOptions{Status: []string{"claimed"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(held) > 1 {
		var titles []string
		for _, h := range held {
			titles = append(titles, fmt.Sprintf("%s (attempt %d of %d)", h.Title, h.Attempts, h.MaxAttempts))
		}
		t.Errorf("one claim call left %d tasks claimed by w1: %v; the one not printed is held until its lease ends and, with max_attempts 1, fails unrun", len(held), titles)
	}
}

// TestAgentStopIsNotClientCancel: an agent told to stop (SIGTERM, SIGINT)
// while a claim waits does not answer as if the client had been
// interrupted (context.Canceled: exit 130): the claim goes on directly.
func TestAgentStopIsNotClientCancel(t *testing.T) {
	dir := t.TempDir()
	st := filestore.Open(dir, filestore.Options{NoSync: true})
	defer st.Close()
	srv, conn := net.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	serve(t, ctx, srv, st)
	ct := clientTeam(t, conn, Options{Direct: fileDirect(dir)})
	time.AfterFunc(200*time.Millisecond, stop) // the agent gets SIGTERM
	// The client's context is alive (pg-queue passes rt.Ctx).
	cctx, ccancel := context.WithCancel(context.Background())
	defer ccancel()
	_, err := ct.Tasks().WaitClaim(cctx, "w1", time.Minute, time.Second)
	if errors.Is(err, context.Canceled) || cli.ExitCode(err) == 130 {
		t.Errorf("a waiting claim whose agent stopped: %v (exit %d), as if the client were interrupted", err, cli.ExitCode(err))
	}
}

// TestCanceledAnswerWithBackgroundContext: a call whose context cannot end
// (context.Background) never returns neither a result nor an error when the
// agent stops under it.
func TestCanceledAnswerWithBackgroundContext(t *testing.T) {
	dir := t.TempDir()
	st := filestore.Open(dir, filestore.Options{NoSync: true})
	defer st.Close()
	srv, conn := net.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	serve(t, ctx, srv, st)
	ct := clientTeam(t, conn, Options{})
	time.AfterFunc(200*time.Millisecond, stop)
	tk, err := ct.Tasks().WaitClaim(context.Background(), "w1", time.Minute, time.Second)
	if tk == nil && err == nil {
		t.Error("WaitClaim returned neither a task nor an error")
	}
}

// TestUpdateOverUnreadableRecord: Update through the agent hands an
// unreadable record (corrupt, or of a newer version) to fn as nil, as both
// stores do, so a heartbeat goes through.
func TestUpdateOverUnreadableRecord(t *testing.T) {
	dir := t.TempDir()
	st := filestore.Open(dir, filestore.Options{NoSync: true})
	defer st.Close()
	tm, err := st.Team("t")
	if err != nil {
		t.Fatal(err)
	}
	beat := func(old *protocol.Worker) (*protocol.Worker, error) {
		return &protocol.Worker{Worker: "1", State: "running"}, nil
	}
	if _, err := tm.Workers().Update(context.Background(), "1", beat); err != nil {
		t.Fatal(err)
	}
	spoil := func() {
		if err := os.WriteFile(filepath.Join(dir, "teams", "t", "worker-1.json"), []byte("{not json"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spoil()
	if _, err := tm.Workers().Update(context.Background(), "1", beat); err != nil {
		t.Fatalf("direct update over an unreadable record: %v", err)
	}
	spoil()
	srv, conn := net.Pipe()
	serve(t, context.Background(), srv, st)
	ct := clientTeam(t, conn, Options{})
	if _, err := ct.Workers().Update(context.Background(), "1", beat); err != nil {
		t.Errorf("update through the agent over an unreadable record: %v (directly it goes through)", err)
	}
}

// enteringTasks say when a WaitClaim starts waiting.
type enteringTasks struct {
	store.Tasks
	in chan struct{}
}

func (q enteringTasks) WaitClaim(ctx context.Context, worker string, lease, wait time.Duration) (*protocol.Task, error) {
	close(q.in)
	return q.Tasks.WaitClaim(ctx, worker, lease, wait)
}

// waitsTasks record the waits of the WaitClaims of a direct store.
type waitsTasks struct {
	store.Tasks
	got *[]time.Duration
}

func (q waitsTasks) WaitClaim(ctx context.Context, worker string, lease, wait time.Duration) (*protocol.Task, error) {
	*q.got = append(*q.got, wait)
	return nil, queue.ErrNothing
}

// TestWaitGoesOnDirectlyForWhatIsLeft: a claim --wait whose agent stops
// mid-wait goes on waiting directly for what is left of --wait, not for
// all of it again.
func TestWaitGoesOnDirectlyForWhatIsLeft(t *testing.T) {
	dir := t.TempDir()
	st := filestore.Open(dir, filestore.Options{NoSync: true})
	defer st.Close()
	in := make(chan struct{})
	srv, conn := net.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	serve(t, ctx, srv, tasksOf{st, func(q store.Tasks) store.Tasks { return enteringTasks{q, in} }})
	var got []time.Duration
	ct := clientTeam(t, conn, Options{Direct: func() (store.Store, error) {
		return tasksOf{filestore.Open(dir, filestore.Options{NoSync: true}), func(q store.Tasks) store.Tasks { return waitsTasks{q, &got} }}, nil
	}})
	go func() {
		<-in
		stop() // the agent gets SIGTERM while the claim waits
	}()
	const wait = time.Hour
	if _, err := ct.Tasks().WaitClaim(context.Background(), "w1", time.Minute, wait); !errors.Is(err, queue.ErrNothing) {
		t.Fatalf("WaitClaim: %v, want nothing claimable from the direct store", err)
	}
	if len(got) != 1 || got[0] >= wait {
		t.Errorf("the direct store was asked to wait %v, want less than %v", got, wait)
	}
}

// worker_write and worker_cas store a record only under its own name: a
// client that sends worker 1's record for key 2 gets bad input, and
// nothing is written (hostile review F2). The client sends its record's
// name with worker_write.
func TestWorkerRecordUnderAnotherKey(t *testing.T) {
	dir := t.TempDir()
	st := filestore.Open(dir, filestore.Options{NoSync: true})
	defer st.Close()
	srv, conn := net.Pipe()
	serve(t, context.Background(), srv, st)
	r := bufio.NewReader(conn)
	if _, err := r.ReadBytes('\n'); err != nil { // hello
		t.Fatal(err)
	}
	call := func(req string) protocol.StoreAgentResponse {
		t.Helper()
		if _, err := conn.Write([]byte(req + "\n")); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var res protocol.StoreAgentResponse
		if err := json.Unmarshal(line, &res); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return res
	}
	for _, req := range []string{
		`{"id":1,"op":"worker_write","team":"t","worker":"2","record":{"worker":"1","pid":999999,"pid_start":"1"}}`,
		`{"id":2,"op":"worker_cas","team":"t","worker":"2","record":{"worker":"1","pid":999999,"pid_start":"1"},"expect":null}`,
	} {
		res := call(req)
		if res.Error == nil || !res.Error.BadInput {
			t.Errorf("%s: %+v, want bad input", req, res.Error)
		}
	}
	for _, n := range []string{"1", "2"} {
		if _, err := os.Stat(filepath.Join(dir, "teams", "t", "worker-"+n+".json")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("worker-%s.json: %v, want none written", n, err)
		}
	}
	res := call(`{"id":3,"op":"worker_write","team":"t","worker":"1","record":{"worker":"1","state":"idle"}}`)
	if res.Error != nil {
		t.Fatalf("a record under its own name: %+v", res.Error)
	}
}
