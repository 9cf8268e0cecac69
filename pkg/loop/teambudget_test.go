package loop

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/ledger"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/filestore"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// With a team budget every call is reserved at the model's prices and
// settled at its cost; the call that could pass the budget is not made:
// the task is released (not failed) and the run ends on a team_budget
// limit.
func TestTeamBudgetStopsBeforeTheCall(t *testing.T) {
	answers := []func(*protocol.Request) (*protocol.EndEvent, error){}
	for range 50 {
		answers = append(answers, call("sh", `{"n":1}`))
	}
	llm := &scriptLLM{answers: answers}
	h := newHarness(t, llm, okTool("x"), "t")
	d := teamdir.Dir{Home: t.TempDir(), Team: "tm"}
	if _, err := ledger.SetBudget(context.Background(), fileTeam(d), 0.01, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.opts.Ledger = ledger.New(fileTeam(d), "1", proc.ThisHost())
	h.opts.BreakerSame = 0
	h.opts.MaxTokens = 100
	// $1 in, $10 out per million tokens: a call is estimated at about
	// $0.001 of output and costs $0.001 (say's usage).
	h.opts.Budget.Prices = &ModelInfo{ID: "m", InputPerMTok: 1, OutputPerMTok: 10}
	src := h.opts.Source.(*ListSource)
	r, _ := NewRunner(h.opts)
	res := r.Run(context.Background())
	var le *LimitError
	if res.State != Failed || !res.Limit || !errors.As(res.Err, &le) || le.Limit != LimitTeamBudget {
		t.Fatalf("result %+v", res)
	}
	tb, err := ledger.Read(context.Background(), fileTeam(d))
	if err != nil {
		t.Fatal(err)
	}
	calls := len(llm.reqs)
	if tb.Calls != calls || math.Abs(tb.SpentUSD-float64(calls)*0.001) > 1e-9 || tb.SpentUSD > 0.01 || len(tb.Reservations) != 0 {
		t.Fatalf("ledger after %d calls: %+v", calls, tb)
	}
	if calls < 5 {
		t.Fatalf("only %d calls within the budget", calls)
	}
	if st := src.Snapshot()[0].Status; st != protocol.StatusPending {
		t.Fatalf("task %s, want pending (released)", st)
	}
	if !strings.Contains(h.out.String(), `"limit":"team_budget"`) {
		t.Fatalf("no team_budget limit event:\n%s", h.out.String())
	}
}

// fileTeam is the team of directory d in the file store.
func fileTeam(d teamdir.Dir) store.Team {
	tm, err := filestore.Open(d.Home, filestore.Options{}).Team(d.Team)
	if err != nil {
		panic(err)
	}
	return tm
}

// The operator's velocity in the team's store (pg-dash's keys) wins over
// the worker's own velocity file: a store velocity of 0 pauses a worker
// whose file says full speed, and the default, 1, hands the pace back to
// the file.
func TestStoreVelocityWins(t *testing.T) {
	vf := filepath.Join(t.TempDir(), "v")
	os.WriteFile(vf, []byte("1000\n"), 0o644)
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}
	h := newHarness(t, llm, okTool("x"), "t")
	d, _ := teamdir.New(t.TempDir(), "tm")
	tm := opaqueTeam{fileTeam(d)}
	ctx := context.Background()
	if err := tm.Workers().SetVelocity(ctx, "1", 0); err != nil {
		t.Fatal(err)
	}
	h.opts.Team, h.opts.Worker, h.opts.VelocityFile = tm, "1", vf
	done := make(chan Result, 1)
	go func() {
		r, _ := NewRunner(h.opts)
		done <- r.Run(context.Background())
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if w, err := tm.Workers().Read(ctx, "1"); err == nil && w.Paused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the store's velocity 0 never paused the worker")
		}
	}
	if err := tm.Workers().SetVelocity(ctx, "1", 1); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.State != Done {
			t.Fatalf("%+v", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker stayed paused")
	}
}

// opaqueTeam hides the file store behind the interface alone.
type opaqueTeam struct{ store.Team }

// A call interrupted mid-way (SIGTERM) is settled at the estimate of its
// input, not at $0: its request was most likely sent and paid for.
func TestInterruptedCallSettlesItsInput(t *testing.T) {
	h := newHarness(t, blockingLLM{}, okTool("x"), "t")
	d := teamdir.Dir{Home: t.TempDir(), Team: "tm"}
	if _, err := ledger.SetBudget(context.Background(), fileTeam(d), 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.opts.Ledger = ledger.New(fileTeam(d), "1", proc.ThisHost())
	h.opts.Budget.Prices = &ModelInfo{ID: "m", InputPerMTok: 3, OutputPerMTok: 15}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	r, _ := NewRunner(h.opts)
	if res := r.Run(ctx); !res.Signal {
		t.Fatalf("%+v", res)
	}
	tb, err := ledger.Read(context.Background(), fileTeam(d))
	if err != nil {
		t.Fatal(err)
	}
	if tb.Calls != 1 || tb.SpentUSD <= 0 || tb.SpentUSD > 0.01 || len(tb.Reservations) != 0 {
		t.Fatalf("ledger %+v, want the call settled at its input's estimate", tb)
	}
}
