package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/ledger"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// unmetered answers like call, with no usage at all: what an
// OpenAI-compatible or local server that sends none in its stream gives.
func unmetered(name, input string) func(*protocol.Request) (*protocol.EndEvent, error) {
	return func(req *protocol.Request) (*protocol.EndEvent, error) {
		id := fmt.Sprintf("c%d", len(req.Messages))
		return &protocol.EndEvent{Type: "end", StopReason: "tool_use", Message: protocol.Message{Role: "assistant", Content: protocol.Content{
			{Type: "text", Text: strings.Repeat("thinking aloud ", 20)},
			{Type: "tool_call", ID: id, Name: name, Input: json.RawMessage(input)}}}}, nil
	}
}

// A provider that reports no usage is charged the loop's estimates: the
// token budget trips as it would with usage reported, one warning says
// so, and the usage in the events and the summary is marked estimated.
func TestNoUsageChargesEstimates(t *testing.T) {
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){unmetered("sh", `{"n":1}`)}}
	h := newHarness(t, llm, okTool("x"), "t")
	h.opts.BreakerSame, h.opts.MaxSteps = 0, 40
	h.opts.MaxTokens = 100
	h.opts.Budget.Tokens = 5000
	res := h.run(t)
	var le *LimitError
	if !errors.As(res.Err, &le) || le.Limit != LimitBudgetTokens {
		t.Fatalf("result %+v, want a budget_tokens limit (%d calls)", res, len(llm.reqs))
	}
	out := h.out.String()
	if n := strings.Count(out, "the provider reported no usage: budgets count estimates"); n != 1 {
		t.Fatalf("%d warnings about the missing usage, want 1:\n%s", n, out)
	}
	var sum protocol.LoopSummaryEvent
	var first protocol.LoopAssistantEvent
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(line, `"type":"summary"`):
			json.Unmarshal([]byte(line), &sum)
		case strings.Contains(line, `"type":"assistant"`) && first.Type == "":
			json.Unmarshal([]byte(line), &first)
		}
	}
	// the first call: the request's estimate in, the answer's out
	u := first.Usage
	if want := NewEstimator("").Request(llm.reqs[0]); !u.Estimated || u.InputTokens != want || u.OutputTokens < 90 || u.OutputTokens > 200 {
		t.Fatalf("first call charged %+v, want the estimates of its request and answer", u)
	}
	if !sum.Usage.Estimated || sum.Usage.Tokens() == 0 || sum.Usage.Tokens() > 5000 {
		t.Fatalf("summary usage %+v", sum.Usage)
	}
}

// The team ledger settles an unmetered call at its estimate, priced: the
// team budget stops the run as it does with usage reported.
func TestNoUsageSettlesEstimatesInTheLedger(t *testing.T) {
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){unmetered("sh", `{"n":1}`)}}
	h := newHarness(t, llm, okTool("x"), "t")
	d := teamdir.Dir{Home: t.TempDir(), Team: "tm"}
	if _, err := ledger.SetBudget(context.Background(), fileTeam(d), 0.05, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.opts.Ledger = ledger.New(fileTeam(d), "1", proc.ThisHost())
	h.opts.BreakerSame, h.opts.MaxSteps = 0, 200
	h.opts.MaxTokens = 100
	h.opts.Budget.Prices = &ModelInfo{ID: "m", InputPerMTok: 3, OutputPerMTok: 15}
	r, _ := NewRunner(h.opts)
	res := r.Run(context.Background())
	var le *LimitError
	if !errors.As(res.Err, &le) || le.Limit != LimitTeamBudget {
		t.Fatalf("result %+v after %d calls, want a team_budget limit", res, len(llm.reqs))
	}
	tb, err := ledger.Read(context.Background(), fileTeam(d))
	if err != nil {
		t.Fatal(err)
	}
	if tb.Calls != len(llm.reqs) || tb.SpentUSD < 0.03 || tb.SpentUSD > 0.05 {
		t.Fatalf("ledger after %d calls: %+v", len(llm.reqs), tb)
	}
}

// unpriced answers like call, with tokens but no cost: a component that
// reports no cost for a model whose prices nobody knows.
func unpriced(name, input string) func(*protocol.Request) (*protocol.EndEvent, error) {
	return func(req *protocol.Request) (*protocol.EndEvent, error) {
		end, err := call(name, input)(req)
		end.Usage.CostUSD = 0
		return end, err
	}
}

// A dollar budget whose model has no prices in the table is refused as
// the run starts: bad input (exit 2), and no call is made.
func TestUSDBudgetWithoutPricesIsRefused(t *testing.T) {
	table := []ModelInfo{{ID: "anthropic/claude-sonnet-4-5", ContextWindow: 200000, InputPerMTok: 3, OutputPerMTok: 15}, {ID: "custom/mine", ContextWindow: 8000}}
	for _, model := range []string{"custom/mine", "custom/other", "anthropic/claude-sonnet-4-5,custom/mine"} {
		llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}
		h := newHarness(t, llm, okTool("x"), "t")
		h.opts.Budget.USD = 1
		h.opts.Lookup = &ModelLookup{ID: model, Table: func(context.Context) ([]ModelInfo, error) { return table, nil }}
		res := h.run(t)
		code, kind, msg := res.Failure()
		var pe *PricesError
		if res.State != Failed || !errors.As(res.Err, &pe) || code != 2 || kind != "usage" || len(llm.reqs) != 0 {
			t.Fatalf("%s: result %+v, failure %d %s %q, %d calls", model, res, code, kind, msg, len(llm.reqs))
		}
		if !strings.Contains(msg, "--budget-usd cannot be kept") || !strings.Contains(msg, "config key models") {
			t.Fatalf("%s: %s", model, msg)
		}
	}
	// with prices the run goes on
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}
	h := newHarness(t, llm, okTool("x"), "t")
	h.opts.Budget.USD = 1
	h.opts.Lookup = &ModelLookup{ID: "anthropic/claude-sonnet-4-5", Table: func(context.Context) ([]ModelInfo, error) { return table, nil }}
	if res := h.run(t); res.State != Done {
		t.Fatalf("%+v", res)
	}
}

// Without prices to look up (a script component, no --model), calls that
// report no cost stop a dollar budget, the run's or the team's, after the
// first: the budget could never stop them otherwise.
func TestUSDBudgetStopsCallsWithoutCost(t *testing.T) {
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){unpriced("sh", `{"n":1}`)}}
	h := newHarness(t, llm, okTool("x"), "t")
	h.opts.BreakerSame = 0
	h.opts.Budget.USD = 1
	res := h.run(t)
	var le *LimitError
	if !errors.As(res.Err, &le) || le.Limit != LimitBudgetUSD || !strings.Contains(le.Reason, "reports no cost") || len(llm.reqs) != 1 {
		t.Fatalf("result %+v after %d calls", res, len(llm.reqs))
	}

	llm = &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){unpriced("sh", `{"n":1}`)}}
	h = newHarness(t, llm, okTool("x"), "t")
	h.opts.BreakerSame = 0
	d := teamdir.Dir{Home: t.TempDir(), Team: "tm"}
	if _, err := ledger.SetBudget(context.Background(), fileTeam(d), 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.opts.Ledger = ledger.New(fileTeam(d), "1", proc.ThisHost())
	r, _ := NewRunner(h.opts)
	res = r.Run(context.Background())
	if !errors.As(res.Err, &le) || le.Limit != LimitTeamBudget || !strings.Contains(le.Reason, "reports no cost") || len(llm.reqs) != 1 {
		t.Fatalf("team: result %+v after %d calls", res, len(llm.reqs))
	}
}

// A model call that failed after its provider counted the input (pg-llm's
// attempts cut after message_start: the error event's usage) is charged:
// in the run's and the task's usage, in the team ledger, and in the
// session's memory, so a resumed run counts it too.
func TestFailedCallIsCharged(t *testing.T) {
	charged := protocol.Usage{InputTokens: 3 * 2880, CostUSD: 0.026}
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){func(*protocol.Request) (*protocol.EndEvent, error) {
		return nil, &ModelError{Event: protocol.ErrorEvent{Type: "error", Kind: protocol.KindNetwork, Retryable: true, Message: "stream cut off", Usage: &charged}}
	}}}
	h := newHarness(t, llm, okTool("x"), "t")
	d := teamdir.Dir{Home: t.TempDir(), Team: "tm"}
	if _, err := ledger.SetBudget(context.Background(), fileTeam(d), 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.opts.Ledger = ledger.New(fileTeam(d), "1", proc.ThisHost())
	res := h.run(t)
	if res.Failed != 1 {
		t.Fatalf("%+v", res)
	}
	var sum protocol.LoopSummaryEvent
	for _, line := range strings.Split(h.out.String(), "\n") {
		if strings.Contains(line, `"type":"summary"`) {
			json.Unmarshal([]byte(line), &sum)
		}
	}
	if sum.Usage != charged {
		t.Fatalf("summary usage %+v, want %+v", sum.Usage, charged)
	}
	tb, err := ledger.Read(context.Background(), fileTeam(d))
	if err != nil {
		t.Fatal(err)
	}
	if tb.Calls != 1 || tb.SpentUSD != charged.CostUSD {
		t.Fatalf("ledger %+v", tb)
	}
	rp, err := h.sess.LoadReplay()
	if err != nil {
		t.Fatal(err)
	}
	if rp.Usage != charged {
		t.Fatalf("replayed usage %+v, want %+v", rp.Usage, charged)
	}
}
