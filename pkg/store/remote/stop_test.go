package remote

import (
	"context"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/dial"
	_ "github.com/powerglide/powerglide/pkg/store/dial/pgdial"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// socketPair is a connected pair of Unix stream sockets, as an agent and
// its client hold them.
func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

// TestStopAnswersEveryRequestRead: an add that the agent reads just as it
// is told to stop, and that it does not run, is answered for: the client
// learns that the agent did nothing of it and adds directly, once, instead
// of failing with "may or may not have taken effect". The hook holds the
// read request until the stopping session has said its last line, the
// moment the race used to lose its answer in.
func TestStopAnswersEveryRequestRead(t *testing.T) {
	url := pgtest.DB(t)
	open := func() (store.Store, error) { return dial.OpenContext(context.Background(), url, dial.Options{}) }
	st, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	agentSide, clientSide := socketPair(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	stopped := make(chan struct{})
	testHookStopped = func() { close(stopped) }
	testHookRead = func(r *protocol.StoreAgentRequest) {
		if r.Op == "add" {
			stop() // SIGTERM, as the add comes in
			<-stopped
		}
	}
	t.Cleanup(func() { testHookRead, testHookStopped = nil, nil }) // after serve's wait
	served := serve(t, ctx, agentSide, st)
	ct := clientTeam(t, clientSide.(Conn), Options{Direct: open})
	if _, err := ct.Tasks().Add([]protocol.Task{{ID: "a1", Title: "a"}}); err != nil {
		t.Fatalf("add read by a stopping agent: %v", err)
	}
	<-served
	tm, err := st.Team("t")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := tm.Tasks().List(queue.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].ID != "a1" {
		t.Fatalf("tasks %v, want a1 once", ts)
	}
}
