package loop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// Limit names, as in limit events.
const (
	LimitSteps        = "steps"
	LimitBreaker      = "breaker"
	LimitBudgetTokens = "budget_tokens"
	LimitBudgetUSD    = "budget_usd"
	LimitIterations   = "iterations"
	LimitVerify       = "verify"
)

// LimitError is a safety limit that stopped a task or the run.
type LimitError struct {
	Limit   string
	Pattern string // the loop pattern of a breaker trip
	Reason  string
}

func (e *LimitError) Error() string { return e.Limit + " limit: " + e.Reason }

// Loop patterns a breaker trip names (LimitError.Pattern, the limit
// event's pattern).
const (
	PatternSameCall   = "same_call"   // one tool, one input, N times in a row
	PatternFailures   = "failures"    // one tool failing N times in a row
	PatternSameOutput = "same_output" // one tool giving one output N times in a row, whatever the inputs
	PatternCycle      = "cycle"       // a cycle of 2 to 4 calls, outputs included, repeated N times
)

// Breaker trips on the patterns of a model going round in circles. Each
// counter is independent; zero disables one. The output and cycle guards
// look at what the calls returned, so a run that keeps getting new
// outputs (progress) never trips them.
type Breaker struct {
	SameMax   int // identical calls (same tool, same input) in a row
	FailMax   int // failures of one tool in a row, whatever the input
	OutputMax int // the same successful output of one tool in a row, whatever the inputs
	CycleMax  int // repetitions of a cycle of 2 to 4 calls (same inputs, same outputs)

	lastSig string
	same    int
	fails   map[string]int
	lastOut uint64
	outs    int
	// hist holds the signatures (call and outcome) of the latest calls,
	// at most maxCycle*CycleMax of them, oldest first.
	hist  []uint64
	names []string
}

// maxCycle is the longest cycle the breaker looks for.
const maxCycle = 4

func canonicalInput(in json.RawMessage) string {
	var v any
	if len(bytes.TrimSpace(in)) == 0 {
		return "{}"
	}
	if json.Unmarshal(in, &v) != nil {
		return string(in)
	}
	b, _ := json.Marshal(v) // map keys sorted: key order does not make a call different
	return string(b)
}

// Call records a call about to run and reports a trip.
func (b *Breaker) Call(c protocol.ToolCall) error {
	sig := c.Name + "\x00" + canonicalInput(c.Input)
	if sig == b.lastSig {
		b.same++
	} else {
		b.lastSig, b.same = sig, 1
	}
	if b.SameMax > 0 && b.same >= b.SameMax {
		return &LimitError{Limit: LimitBreaker, Pattern: PatternSameCall, Reason: fmt.Sprintf("same call: %s called %d times in a row with the same input %s", c.Name, b.same, termtext.OneLine(canonicalInput(c.Input), 200))}
	}
	return nil
}

func hashOf(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		_, _ = h.Write([]byte(p))
		_, _ = h.Write([]byte{0})
	}
	return h.Sum64()
}

// Result records the result of call c and reports a trip.
func (b *Breaker) Result(c protocol.ToolCall, r protocol.ToolResult) error {
	if err := b.failure(r); err != nil {
		return err
	}
	status := "ok"
	if !r.OK {
		status = "failed"
	}
	if err := b.output(r, status); err != nil {
		return err
	}
	return b.cycle(hashOf(c.Name, canonicalInput(c.Input), status, r.Output), c.Name)
}

func (b *Breaker) failure(r protocol.ToolResult) error {
	if b.fails == nil {
		b.fails = map[string]int{}
	}
	if r.OK {
		b.fails[r.Name] = 0
		return nil
	}
	b.fails[r.Name]++
	if b.FailMax > 0 && b.fails[r.Name] >= b.FailMax {
		msg := ""
		if r.Error != nil {
			msg = ": last error: " + termtext.OneLine(*r.Error, 200)
		}
		return &LimitError{Limit: LimitBreaker, Pattern: PatternFailures, Reason: fmt.Sprintf("repeated failure: %s failed %d times in a row%s", r.Name, b.fails[r.Name], msg)}
	}
	return nil
}

// output counts one tool's successful results that are all the same
// (failures are the failure guard's).
func (b *Breaker) output(r protocol.ToolResult, status string) error {
	if !r.OK {
		b.lastOut, b.outs = 0, 0
		return nil
	}
	h := hashOf(r.Name, status, r.Output)
	if h == b.lastOut {
		b.outs++
	} else {
		b.lastOut, b.outs = h, 1
	}
	if b.OutputMax > 0 && b.outs >= b.OutputMax {
		return &LimitError{Limit: LimitBreaker, Pattern: PatternSameOutput, Reason: fmt.Sprintf("same output: %s returned the same output %d times in a row, whatever its input: %s", r.Name, b.outs, termtext.OneLine(r.Output, 120))}
	}
	return nil
}

// cycle looks for the latest calls being a cycle of 2 to 4 calls (inputs
// and outcomes alike) repeated CycleMax times. A cycle of one call is the
// same-call guard's; a cycle made of one call repeated is not a cycle of
// its length.
func (b *Breaker) cycle(sig uint64, name string) error {
	if b.CycleMax <= 1 {
		return nil
	}
	b.hist = append(b.hist, sig)
	b.names = append(b.names, name)
	if keep := maxCycle * b.CycleMax; len(b.hist) > keep {
		b.hist = append(b.hist[:0], b.hist[len(b.hist)-keep:]...)
		b.names = append(b.names[:0], b.names[len(b.names)-keep:]...)
	}
	n := len(b.hist)
	for p := 2; p <= maxCycle; p++ {
		span := p * b.CycleMax
		if n < span {
			break
		}
		h := b.hist[n-span:]
		repeats := true
		for i := p; i < span && repeats; i++ {
			repeats = h[i] == h[i-p]
		}
		if !repeats || !distinct(h[:p]) {
			continue
		}
		return &LimitError{Limit: LimitBreaker, Pattern: PatternCycle, Reason: fmt.Sprintf("cycle: the same %d calls (%s) repeated %d times with the same inputs and outputs", p, strings.Join(b.names[len(b.names)-p:], " → "), b.CycleMax)}
	}
	return nil
}

// distinct reports whether a cycle is not one call repeated (that is a
// cycle of 1) nor a shorter cycle repeated (A B A B is a cycle of 2, not 4).
func distinct(c []uint64) bool {
	for p := 1; p < len(c); p++ {
		if len(c)%p != 0 {
			continue
		}
		short := true
		for i := p; i < len(c) && short; i++ {
			short = c[i] == c[i-p]
		}
		if short {
			return false
		}
	}
	return true
}

// Reset forgets the history (a new task).
func (b *Breaker) Reset() {
	b.lastSig, b.same, b.fails, b.lastOut, b.outs, b.hist, b.names = "", 0, nil, 0, 0, nil, nil
}

// Budget halts the run before a call that could pass a token or dollar cap.
type Budget struct {
	Tokens int     // 0: no cap
	USD    float64 // 0: no cap
	// Prices are the model's, when known: each call is then priced before
	// it runs, the first one included.
	Prices *ModelInfo
}

// Check reports whether a call estimated at in input tokens with maxOut
// output tokens may run after spent. With the model's prices the call is
// priced at in input tokens (at the cache-write price when dearer) and
// maxOut output tokens. Without them (a model pg-llm does not know, a
// script component) the estimate uses the cost per token seen so far, so
// the first call runs unpriced; and when calls were made that reported no
// cost, the budget cannot be kept: that is a limit too.
func (b Budget) Check(spent protocol.Usage, in, maxOut int) error {
	if b.Tokens > 0 {
		need := spent.Tokens() + in + maxOut
		if need > b.Tokens {
			return &LimitError{Limit: LimitBudgetTokens, Reason: fmt.Sprintf("the next call could use %d tokens (%d estimated input + %d max_tokens) and %d are spent, past the budget of %d", in+maxOut, in, maxOut, spent.Tokens(), b.Tokens)}
		}
	}
	if b.USD <= 0 {
		return nil
	}
	cost := spent.CostUSD
	priced := b.Prices != nil && b.Prices.Priced()
	if priced {
		// A component that reports no cost is priced here.
		cost = max(cost, b.Prices.Cost(spent))
	}
	if cost >= b.USD {
		return &LimitError{Limit: LimitBudgetUSD, Reason: fmt.Sprintf("$%.4f spent, the budget is $%.4f", cost, b.USD)}
	}
	if !priced && cost == 0 && spent.Tokens() > 0 {
		// Neither prices nor a reported cost: every call would cost $0.
		return &LimitError{Limit: LimitBudgetUSD, Reason: fmt.Sprintf("%d tokens spent and the model component reports no cost, nor are the model's prices known: the budget of $%.4f cannot be kept (give the prices in the config key models, or use --budget-tokens)", spent.Tokens(), b.USD)}
	}
	next, ok := b.nextCost(spent, in, maxOut)
	if !ok {
		return nil
	}
	if cost+next > b.USD {
		return &LimitError{Limit: LimitBudgetUSD, Reason: fmt.Sprintf("the next call could cost $%.4f with $%.4f spent, past the budget of $%.4f", next, cost, b.USD)}
	}
	return nil
}

// ReadVelocity reads a velocity file: one number, steps per second (1 =
// a step a second; 0 = paused). A missing or empty file is "not set".
func ReadVelocity(path string) (v float64, set bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v, set, err = teamdir.ParseVelocity(b)
	if err != nil {
		return 0, false, fmt.Errorf("velocity file %s: %w", path, err)
	}
	return v, set, nil
}

// VelocityDelay is the pause before a step: 1000/velocity milliseconds.
func VelocityDelay(v float64) time.Duration {
	if v <= 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / v)
}
