package loop

import (
	"errors"
	"testing"
)

// want is the transition table written out by hand, independently of the
// table in state.go: every (state, input) pair not listed must be refused.
var want = map[[2]string]State{
	{"idle", "start"}:        LoadTasks,
	{"idle", "fatal"}:        Failed,
	{"load_tasks", "loaded"}: PickTask,
	{"load_tasks", "fatal"}:  Failed,
	{"pick_task", "picked"}:  Thinking,
	{"pick_task", "empty"}:   Done,
	{"pick_task", "fatal"}:   Failed,

	{"thinking", "tool_calls"}:  ToolCall,
	{"thinking", "answer"}:      Verify,
	{"thinking", "truncated"}:   Thinking,
	{"thinking", "task_failed"}: PickTask,
	{"thinking", "fatal"}:       Failed,

	{"tool_call", "parsed"}:      Executing,
	{"tool_call", "task_failed"}: PickTask,
	{"tool_call", "fatal"}:       Failed,

	{"executing", "executed"}:    Observing,
	{"executing", "task_failed"}: PickTask,
	{"executing", "fatal"}:       Failed,

	{"observing", "observed"}:    Thinking,
	{"observing", "task_failed"}: PickTask,
	{"observing", "fatal"}:       Failed,

	{"verify", "verify_failed"}: Thinking,
	{"verify", "verify_passed"}: Commit,
	{"verify", "task_failed"}:   PickTask,
	{"verify", "fatal"}:         Failed,

	{"commit", "committed"}:   PickTask,
	{"commit", "task_failed"}: PickTask,
	{"commit", "fatal"}:       Failed,
}

func TestNextExhaustive(t *testing.T) {
	if len(States) != 11 {
		t.Fatalf("the seed has 11 states, got %d", len(States))
	}
	allowed := 0
	for _, s := range States {
		for _, in := range Inputs {
			got, err := Next(s, in)
			exp, ok := want[[2]string{string(s), string(in)}]
			switch {
			case ok && err != nil:
				t.Errorf("Next(%s, %s): unexpected error %v", s, in, err)
			case ok && got != exp:
				t.Errorf("Next(%s, %s) = %s, want %s", s, in, got, exp)
			case !ok && err == nil:
				t.Errorf("Next(%s, %s) = %s, want refusal", s, in, got)
			case !ok:
				var te *TransitionError
				if !errors.As(err, &te) || te.From != s || te.Input != in || got != s {
					t.Errorf("Next(%s, %s): bad refusal %v (state %s)", s, in, err, got)
				}
			}
			if ok {
				allowed++
			}
		}
	}
	if allowed != len(want) {
		t.Errorf("%d transitions allowed, want %d", allowed, len(want))
	}
}

func TestTerminalStatesAcceptNothing(t *testing.T) {
	for _, s := range []State{Done, Failed} {
		if !s.Terminal() {
			t.Errorf("%s should be terminal", s)
		}
		if a := Allowed(s); len(a) != 0 {
			t.Errorf("%s accepts %v", s, a)
		}
	}
	for _, s := range States {
		if !s.Terminal() && len(Allowed(s)) == 0 {
			t.Errorf("non-terminal %s accepts nothing", s)
		}
	}
}

// Every state is reachable from idle and every non-terminal state can reach
// both terminal states.
func TestReachability(t *testing.T) {
	reach := func(from State) map[State]bool {
		seen := map[State]bool{from: true}
		queue := []State{from}
		for len(queue) > 0 {
			s := queue[0]
			queue = queue[1:]
			for _, in := range Allowed(s) {
				n, _ := Next(s, in)
				if !seen[n] {
					seen[n] = true
					queue = append(queue, n)
				}
			}
		}
		return seen
	}
	all := reach(Idle)
	for _, s := range States {
		if !all[s] {
			t.Errorf("%s is unreachable from idle", s)
		}
		if s.Terminal() {
			continue
		}
		r := reach(s)
		if !r[Done] || !r[Failed] {
			t.Errorf("%s cannot reach both done and failed", s)
		}
	}
}

// The runs the driver performs, as input sequences.
func TestRuns(t *testing.T) {
	runs := []struct {
		name string
		ins  []Input
		end  State
	}{
		{"no tasks", []Input{Start, Loaded, Empty}, Done},
		{"one task, tools, verify fails then passes", []Input{Start, Loaded, Picked, ToolCalls, Parsed, Executed, Observed, Answer, VerifyFailed, Answer, VerifyPassed, Committed, Empty}, Done},
		{"step limit fails the task, next task", []Input{Start, Loaded, Picked, ToolCalls, Parsed, Executed, Observed, TaskFailed, Picked, Answer, VerifyPassed, Committed, Empty}, Done},
		{"auth error", []Input{Start, Loaded, Picked, Fatal}, Failed},
		{"source broken", []Input{Start, Fatal}, Failed},
	}
	for _, r := range runs {
		s := Idle
		for i, in := range r.ins {
			n, err := Next(s, in)
			if err != nil {
				t.Fatalf("%s: step %d: %v", r.name, i, err)
			}
			s = n
		}
		if s != r.end {
			t.Errorf("%s: ended in %s, want %s", r.name, s, r.end)
		}
	}
}

func TestInTask(t *testing.T) {
	for _, s := range States {
		want := s == Thinking || s == ToolCall || s == Executing || s == Observing || s == Verify || s == Commit
		if s.InTask() != want {
			t.Errorf("%s.InTask() = %v", s, !want)
		}
	}
}
