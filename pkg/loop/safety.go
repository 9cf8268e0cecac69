package loop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
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
	Limit  string
	Reason string
}

func (e *LimitError) Error() string { return e.Limit + " limit: " + e.Reason }

// Breaker trips on the same call repeated and on a tool failing repeatedly.
// The two counters are independent; zero disables one.
type Breaker struct {
	SameMax int // identical calls (same tool, same input) in a row
	FailMax int // failures of one tool in a row, whatever the input

	lastSig string
	same    int
	fails   map[string]int
}

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
		return &LimitError{Limit: LimitBreaker, Reason: fmt.Sprintf("%s called %d times in a row with the same input %s", c.Name, b.same, oneLine(canonicalInput(c.Input), 200))}
	}
	return nil
}

// Result records a call's result and reports a trip.
func (b *Breaker) Result(r protocol.ToolResult) error {
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
			msg = ": last error: " + oneLine(*r.Error, 200)
		}
		return &LimitError{Limit: LimitBreaker, Reason: fmt.Sprintf("%s failed %d times in a row%s", r.Name, b.fails[r.Name], msg)}
	}
	return nil
}

// Reset forgets the history (a new task).
func (b *Breaker) Reset() { b.lastSig, b.same, b.fails = "", 0, nil }

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
// the first call runs unpriced.
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
		cost = max(cost, b.Prices.Cost(spent.InputTokens, spent.OutputTokens, spent.CacheReadTokens, spent.CacheWriteTokens))
	}
	if cost >= b.USD {
		return &LimitError{Limit: LimitBudgetUSD, Reason: fmt.Sprintf("$%.4f spent, the budget is $%.4f", cost, b.USD)}
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
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0, false, nil
	}
	v, err = strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return 0, false, fmt.Errorf("velocity file %s: expected a number ≥ 0, got %q", path, s)
	}
	return v, true, nil
}

// VelocityDelay is the pause before a step: 1000/velocity milliseconds.
func VelocityDelay(v float64) time.Duration {
	if v <= 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / v)
}
