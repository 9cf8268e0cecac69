package loop

import (
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

func failWith(kind string) func(*protocol.Request) (*protocol.EndEvent, error) {
	return func(*protocol.Request) (*protocol.EndEvent, error) {
		return nil, &ModelError{Event: protocol.ErrorEvent{Type: "error", Kind: kind, Message: "stream cut off"}}
	}
}

// A step's model call that failed in a passing way (a reset connection
// after the answer started, overload, 5xx, rate limit) is made again
// twice, after a pause, before the task fails (F3); one that would fail
// the same way again (a bad request) is not.
func TestPassingModelFailureIsMadeAgain(t *testing.T) {
	type answer = func(*protocol.Request) (*protocol.EndEvent, error)
	for _, c := range []struct {
		name    string
		answers []answer
		wait    time.Duration
		calls   int
		done    bool
	}{
		{"reset then done", []answer{failWith(protocol.KindNetwork), say("done")}, time.Millisecond, 2, true},
		{"two passing failures", []answer{failWith(protocol.KindOverloaded), failWith(protocol.KindServer), say("done")}, time.Millisecond, 3, true},
		{"three fail the task", []answer{failWith(protocol.KindRateLimit), failWith(protocol.KindNetwork), failWith(protocol.KindNetwork), say("done")}, time.Millisecond, 3, false},
		{"bad request", []answer{failWith(protocol.KindBadRequest), say("done")}, time.Millisecond, 1, false},
		{"off", []answer{failWith(protocol.KindNetwork), say("done")}, 0, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			llm := &scriptLLM{answers: c.answers}
			h := newHarness(t, llm, okTool("x"), "t")
			h.opts.ModelRetryWait = c.wait
			res := h.run(t)
			if len(llm.reqs) != c.calls {
				t.Errorf("%d model calls, want %d", len(llm.reqs), c.calls)
			}
			if done := res.TasksDone == 1; done != c.done {
				t.Fatalf("result %+v, want done %v\n%s", res, c.done, h.out.String())
			}
			if c.calls > 1 && !strings.Contains(h.out.String(), "making it again in 1ms (1 of 2)") {
				t.Errorf("no warning of the call made again:\n%s", h.out.String())
			}
		})
	}
}
