package loop

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

func bashCall(cmd string) protocol.ToolCall {
	in, _ := json.Marshal(map[string]string{"command": cmd})
	return protocol.ToolCall{Name: "bash", Input: in}
}

func okResult(out string) protocol.ToolResult {
	return protocol.ToolResult{Name: "bash", OK: true, Output: out}
}

// step feeds one call and its result to the breaker.
func step(b *Breaker, c protocol.ToolCall, r protocol.ToolResult) error {
	if err := b.Call(c); err != nil {
		return err
	}
	return b.Result(c, r)
}

func tripPattern(t *testing.T, err error) string {
	t.Helper()
	var le *LimitError
	if !errors.As(err, &le) {
		t.Fatalf("want a limit, got %v", err)
	}
	if le.Limit != LimitBreaker {
		t.Fatalf("limit %q", le.Limit)
	}
	return le.Pattern
}

func TestBreakerSameOutput(t *testing.T) {
	b := Breaker{SameMax: 3, FailMax: 5, OutputMax: 4, CycleMax: 3}
	var err error
	n := 0
	for n = 1; n <= 10 && err == nil; n++ {
		err = step(&b, bashCall(fmt.Sprintf("echo same # %d", n)), okResult("same\n"))
	}
	if p := tripPattern(t, err); p != PatternSameOutput || n-1 != 4 {
		t.Fatalf("pattern %q after %d calls: %v", p, n-1, err)
	}
	if !strings.Contains(err.Error(), "same output: bash returned the same output 4 times in a row") {
		t.Fatalf("reason: %v", err)
	}
}

func TestBreakerCycles(t *testing.T) {
	for _, p := range []int{2, 3, 4} {
		b := Breaker{SameMax: 3, FailMax: 5, OutputMax: 5, CycleMax: 3}
		var err error
		calls := 0
		for i := 0; i < 40 && err == nil; i++ {
			k := i % p
			err = step(&b, bashCall(fmt.Sprintf("cat f%d", k)), okResult(fmt.Sprintf("content %d", k)))
			calls++
		}
		if pat := tripPattern(t, err); pat != PatternCycle || calls != 3*p {
			t.Fatalf("cycle of %d: pattern %q after %d calls: %v", p, pat, calls, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("cycle: the same %d calls", p)) {
			t.Fatalf("reason: %v", err)
		}
	}
}

// A run that gets new outputs is making progress: neither the output nor
// the cycle guard trips, even when its calls repeat.
func TestBreakerProgressDoesNotTrip(t *testing.T) {
	b := Breaker{SameMax: 3, FailMax: 5, OutputMax: 3, CycleMax: 2}
	for i := 0; i < 1000; i++ {
		// A/B alternation (run the tests, read the log) whose outputs change.
		c := bashCall("go test ./...")
		if i%2 == 1 {
			c = bashCall("tail log")
		}
		if err := step(&b, c, okResult(fmt.Sprintf("run %d", i))); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	// A cycle of one call repeated is not a cycle of 2: the same-call
	// guard owns it.
	b = Breaker{CycleMax: 2}
	for i := 0; i < 20; i++ {
		if err := step(&b, bashCall("true"), okResult("")); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

func TestDistinct(t *testing.T) {
	for _, c := range []struct {
		in   []uint64
		want bool
	}{{[]uint64{1, 2}, true}, {[]uint64{1, 1}, false}, {[]uint64{1, 2, 1, 2}, false}, {[]uint64{1, 2, 3, 1}, true}, {[]uint64{1, 1, 2}, true}} {
		if got := distinct(c.in); got != c.want {
			t.Errorf("distinct(%v) = %v", c.in, got)
		}
	}
}
