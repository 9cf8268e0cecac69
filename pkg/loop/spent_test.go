package loop

import (
	"context"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// TestWorkerRecordCarriesSpent: a new process taking a worker over keeps
// what the earlier processes spent in the record's spent field, so team
// totals (pg-dash, pg-monitor's budget) survive restarts.
func TestWorkerRecordCarriesSpent(t *testing.T) {
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}
	h := newHarness(t, llm, okTool("x"), "t")
	d, _ := teamdir.New(t.TempDir(), "tm")
	d.Ensure()
	// An earlier process (another pid) spent 0.5 on top of 1 carried before it.
	if err := d.WriteWorker(&protocol.Worker{Worker: "1", PID: 1, PIDStart: "1", Epoch: 3, State: "failed",
		Usage: protocol.Usage{InputTokens: 100, CostUSD: 0.5}, Spent: &protocol.Usage{InputTokens: 200, CostUSD: 1}}); err != nil {
		t.Fatal(err)
	}
	h.opts.Team, h.opts.Worker = &d, "1"
	r, _ := NewRunner(h.opts)
	if res := r.Run(context.Background()); res.State != Done {
		t.Fatalf("%+v", res)
	}
	w, err := d.ReadWorker("1")
	if err != nil {
		t.Fatal(err)
	}
	if w.Spent == nil || w.Spent.CostUSD != 1.5 || w.Spent.InputTokens != 300 || w.Epoch != 4 {
		t.Fatalf("worker record after a restart: spent %+v epoch %d, want $1.5 and 300 tokens, epoch 4", w.Spent, w.Epoch)
	}
}
