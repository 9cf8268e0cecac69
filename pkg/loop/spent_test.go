package loop

import (
	"bytes"
	"context"
	"testing"
	"time"

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
	h.opts.Team, h.opts.Worker = fileTeam(d), "1"
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

// TestResumeCountsUsageOnce: a session resumed by the same worker brings
// its usage along for the budgets, but that usage is already in the
// worker's spent (carried from the process that ran it), so the record's
// usage holds only the new process's own and the total counts it once.
func TestResumeCountsUsageOnce(t *testing.T) {
	home := t.TempDir()
	sess, err := CreateSession(home, home, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	d, _ := teamdir.New(t.TempDir(), "tm")
	d.Ensure()
	earlier := protocol.Usage{InputTokens: 100, OutputTokens: 50, CostUSD: 0.5}
	// The process that ran the session before it was interrupted.
	if err := d.WriteWorker(&protocol.Worker{Worker: "1", PID: 1, PIDStart: "1", Epoch: 1, State: "thinking", Usage: earlier}); err != nil {
		t.Fatal(err)
	}
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}
	var out bytes.Buffer
	r, err := NewRunner(Options{Workdir: home, LLM: llm, Tools: okTool(""), MaxTokens: 1000,
		Source: &ListSource{Tasks: []protocol.Task{{ID: "t", Title: "t"}}}, Events: NewEmitter(&out, false),
		Session: sess, Resume: &Replay{Usage: earlier}, Team: fileTeam(d), Worker: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if res := r.Run(context.Background()); res.State != Done {
		t.Fatalf("%+v", res)
	}
	w, err := d.ReadWorker("1")
	if err != nil {
		t.Fatal(err)
	}
	own := protocol.Usage{InputTokens: 10, OutputTokens: 10, CostUSD: 0.001} // say's one call
	if w.Usage != own || w.Spent == nil || *w.Spent != earlier {
		t.Fatalf("record: usage %+v spent %+v, want usage %+v spent %+v", w.Usage, w.Spent, own, earlier)
	}
	if got, want := sess.Info.Usage, earlier.Add(own); got != want {
		t.Fatalf("session usage %+v, want %+v", got, want)
	}
}
