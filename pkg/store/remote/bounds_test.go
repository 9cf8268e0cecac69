package remote

import (
	"bufio"
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store/filestore"
)

// TestClientThatDoesNotReadIsHungUp: a client that sends request after
// request and reads no answer pins neither the agent's goroutines nor the
// connection: at most maxInflight calls run at once, and once an answer
// waits writeTimeout unread the agent hangs up and Serve returns, its
// calls ended (as a stop waits for them, a stop then ends too).
func TestClientThatDoesNotReadIsHungUp(t *testing.T) {
	defer func(d time.Duration) { writeTimeout = d }(writeTimeout)
	writeTimeout = 200 * time.Millisecond
	agentSide, client := socketPair(t)
	defer client.Close()
	st := filestore.Open(t.TempDir(), filestore.Options{NoSync: true})
	before := runtime.NumGoroutine()
	done := serve(t, context.Background(), agentSide, st)
	if _, err := bufio.NewReader(client).ReadString('\n'); err != nil { // the hello
		t.Fatal(err)
	}
	// Far more than the socket buffers hold, each a call that answers at
	// once: the answers fill the buffers, and the client never reads them.
	sent := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(client)
		for id := 1; id <= 20000; id++ {
			if _, err := fmt.Fprintf(w, `{"id":%d,"op":"exists","team":"t"}`+"\n", id); err != nil {
				sent <- err
				return
			}
		}
		sent <- w.Flush()
	}()
	peak := 0
	deadline := time.After(20 * time.Second)
	for {
		select {
		case <-done:
			if peak > before+maxInflight+16 {
				t.Errorf("%d goroutines at the peak, %d before: more calls ran at once than maxInflight (%d)", peak, before, maxInflight)
			}
			<-sent // the hang-up ends the client's writes too
			return
		case <-deadline:
			t.Fatalf("Serve still runs 20 s after its client stopped reading (%d goroutines)", runtime.NumGoroutine())
		case <-time.After(10 * time.Millisecond):
			peak = max(peak, runtime.NumGoroutine())
		}
	}
}

// TestDuplicateIDRefused: a request under the id of a call in flight is
// refused, not run: the first stays cancellable by its id.
func TestDuplicateIDRefused(t *testing.T) {
	agentSide, client := socketPair(t)
	defer client.Close()
	st := filestore.Open(t.TempDir(), filestore.Options{NoSync: true})
	serve(t, context.Background(), agentSide, st)
	r := bufio.NewReader(client)
	if _, err := r.ReadString('\n'); err != nil { // the hello
		t.Fatal(err)
	}
	send := func(line string) {
		t.Helper()
		if _, err := fmt.Fprintln(client, line); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"id":7,"op":"wait_claim","team":"t","worker":"1","wait_ns":3600000000000}`)
	send(`{"id":7,"op":"wait_claim","team":"t","worker":"2","wait_ns":3600000000000}`)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(line, `"id":7`) || !strings.Contains(line, "already in flight") {
		t.Fatalf("the second call under id 7: %s", line)
	}
	send(`{"id":7,"op":"cancel"}`)
	if line, err = r.ReadString('\n'); err != nil || !strings.Contains(line, `"id":7`) {
		t.Fatalf("the first call, cancelled: %q %v", line, err)
	}
}

// TestNegativeLeaseRefused: a claim, wait_claim or renew whose lease_ns is
// negative is bad input, as pg-queue's --lease refuses it, not a request
// for the default lease: nothing is claimed or renewed. A Go caller's
// lease ≤ 0 still means the default through the client, as on the stores.
func TestNegativeLeaseRefused(t *testing.T) {
	agentSide, client := socketPair(t)
	defer client.Close()
	st := filestore.Open(t.TempDir(), filestore.Options{NoSync: true})
	tm, err := st.Team("t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Tasks().Add([]protocol.Task{{ID: "a", Title: "a"}}); err != nil {
		t.Fatal(err)
	}
	serve(t, context.Background(), agentSide, st)
	r := bufio.NewReader(client)
	if _, err := r.ReadString('\n'); err != nil { // the hello
		t.Fatal(err)
	}
	for i, req := range []string{
		`{"id":1,"op":"claim","team":"t","worker":"1","lease_ns":-1}`,
		`{"id":2,"op":"wait_claim","team":"t","worker":"1","lease_ns":-600000000000,"wait_ns":1000000}`,
		`{"id":3,"op":"renew","team":"t","task":"a","token":1,"lease_ns":-1}`,
	} {
		if _, err := fmt.Fprintln(client, req); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(line, fmt.Sprintf(`"id":%d`, i+1)) || !strings.Contains(line, `lease_ns must not be negative`) || !strings.Contains(line, `"bad_input":true`) {
			t.Errorf("%s\n→ %s", req, line)
		}
	}
	got, err := tm.Tasks().Show("a")
	if err != nil || got.Status != "pending" || got.Attempts != 0 {
		t.Fatalf("task after the refused claims: %+v %v", got, err)
	}
	// Through the client, a Go caller's negative lease is the default.
	agentSide2, client2 := socketPair(t)
	serve(t, context.Background(), agentSide2, st)
	claimed, err := clientTeam(t, client2, Options{}).Tasks().Claim("1", -time.Second)
	if err != nil || claimed.Claim == nil || time.Until(claimed.Claim.Until) < queue.DefaultLease-time.Minute {
		t.Fatalf("client Claim with lease -1s: %+v %v, want the default lease", claimed, err)
	}
}
