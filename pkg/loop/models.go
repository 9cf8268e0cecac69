package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/powerglide/powerglide/pkg/ledger"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// ModelInfo is one model of the model component's table (`pg-llm models
// --json`, or its answer to a model-list-request).
type ModelInfo = protocol.ModelInfo

// ModelLookup finds the run's model in a model table while the run
// starts: Runner.Run asks Table as it starts the model coprocess, and
// load_tasks waits for the answer, which it needs before the first
// request (the context window, the prices of the dollar budget), after
// the tools are listed. So the table is read while the coprocesses start,
// off the path to the first request.
type ModelLookup struct {
	ID string // the model or fallback chain a,b,c
	// Table reads the model table: pg-llm serve's answer to a
	// model-list-request (ServeLLM.Models), or `pg-llm models --json`
	// (ReadModels). A failure is a warning: the model is then unknown.
	Table func(ctx context.Context) ([]ModelInfo, error)
	// Window: the run's context window is the model's (none was
	// configured); Options.ContextWindow is the one of a model not found.
	Window bool
}

type lookupResult struct {
	table []ModelInfo
	err   error
}

// lookModelUp starts reading the model table (Options.Lookup).
func (r *Runner) lookModelUp(ctx context.Context) {
	l := r.o.Lookup
	if l == nil || l.Table == nil {
		return
	}
	r.lookup = make(chan lookupResult, 1)
	go func() {
		table, err := l.Table(ctx)
		r.lookup <- lookupResult{table, err}
	}()
}

// modelFound waits for the model table and takes the model's context
// window and prices from it. A dollar budget, the run's or the team's,
// with a model the table has no prices for is refused (a *PricesError):
// its calls would cost $0 and the budget would never stop them.
func (r *Runner) modelFound(ctx context.Context) error {
	if r.lookup == nil {
		return nil
	}
	res := <-r.lookup
	r.lookup = nil
	if res.err != nil {
		fmt.Fprintf(r.o.Stderr, "pg-loop: warning: %v\n", res.err)
		return nil
	}
	if err := r.checkPrices(ctx, res.table); err != nil {
		return err
	}
	m, ok := ChainModel(res.table, r.o.Lookup.ID)
	if !ok {
		return nil
	}
	r.o.ModelInfo = &m
	if r.o.Lookup.Window && m.ContextWindow > 0 {
		r.o.ContextWindow = m.ContextWindow
		if err := r.o.checkWindow(); err != nil {
			return err
		}
	}
	if m.Priced() {
		r.o.Budget.Prices = &m
	}
	return nil
}

// ReadModels runs a `pg-llm models --json`-like command and decodes its
// lines.
func ReadModels(ctx context.Context, cmdline, dir string) ([]ModelInfo, error) {
	cmd := shellCommand(ctx, nil, cmdline)
	cmd.Dir = dir
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("model table from %q: %w: %s", cmdline, err, termtext.OneLine(errb.String(), 200))
	}
	var table []ModelInfo
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var m ModelInfo
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("model table from %q: %w", cmdline, err)
		}
		table = append(table, m)
	}
	return table, nil
}

// FindModel finds a model in the table as pg-llm does: exactly, or by the
// longest known id that the name extends with a dash.
func FindModel(table []ModelInfo, id string) (ModelInfo, bool) {
	best := -1
	for i, m := range table {
		if m.ID == id {
			return m, true
		}
		if strings.HasPrefix(id, m.ID+"-") && (best < 0 || len(m.ID) > len(table[best].ID)) {
			best = i
		}
	}
	if best < 0 {
		return ModelInfo{}, false
	}
	return table[best], true
}

// ChainModel describes a model or a fallback chain a,b,c on the safe side:
// the smallest context window and the dearest prices of its models. The
// prices count only when every model of the chain has them.
func ChainModel(table []ModelInfo, chain string) (ModelInfo, bool) {
	out := ModelInfo{ID: chain}
	found, priced := false, true
	for _, id := range strings.Split(chain, ",") {
		m, ok := FindModel(table, strings.TrimSpace(id))
		if !ok {
			priced = false
			continue
		}
		found = true
		if m.ContextWindow > 0 && (out.ContextWindow == 0 || m.ContextWindow < out.ContextWindow) {
			out.ContextWindow = m.ContextWindow
		}
		if !m.Priced() {
			priced = false
		}
		out.InputPerMTok = max(out.InputPerMTok, m.InputPerMTok)
		out.OutputPerMTok = max(out.OutputPerMTok, m.OutputPerMTok)
		out.CacheReadPerMTok = max(out.CacheReadPerMTok, m.CacheReadPerMTok)
		out.CacheWritePerMTok = max(out.CacheWritePerMTok, m.CacheWritePerMTok)
	}
	if !priced {
		out.InputPerMTok, out.OutputPerMTok, out.CacheReadPerMTok, out.CacheWritePerMTok = 0, 0, 0, 0
	}
	return out, found
}

// PricesError is a dollar budget the run cannot keep: the model table
// (pg-llm models) has no prices for a model of the chain. It is bad input
// (exit 2): the prices are configuration.
type PricesError struct {
	Budget string // which budget: --budget-usd, or the team's
	Model  string // the first model of the chain without prices
}

func (e *PricesError) Error() string {
	return fmt.Sprintf("%s cannot be kept: 'pg-llm models' has no prices for %s, so its calls would cost $0; give them in the config key models, e.g. {\"models\":{\"%s\":{\"input_per_mtok\":3,\"output_per_mtok\":15}}}, or use --budget-tokens", e.Budget, e.Model, e.Model)
}

// BadInput makes the refusal exit 2.
func (e *PricesError) BadInput() bool { return true }

// checkPrices refuses a dollar budget whose model has no prices in table.
func (r *Runner) checkPrices(ctx context.Context, table []ModelInfo) error {
	budget := ""
	switch {
	case r.o.Budget.USD > 0:
		budget = "--budget-usd"
	case r.o.Ledger != nil:
		tb, err := ledger.Read(ctx, r.o.Ledger.Team)
		if err != nil || tb.BudgetUSD <= 0 {
			return nil // no team budget (or none readable yet: each call reads it)
		}
		budget = fmt.Sprintf("the team budget ($%.4f)", tb.BudgetUSD)
	default:
		return nil
	}
	for _, id := range strings.Split(r.o.Lookup.ID, ",") {
		id = strings.TrimSpace(id)
		if m, ok := FindModel(table, id); !ok || !m.Priced() {
			return &PricesError{Budget: budget, Model: id}
		}
	}
	return nil
}
