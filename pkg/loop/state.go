// Package loop is pg-loop's Ralph loop: a pure state machine (this file),
// the driver that owns the I/O around it, the model and tool components
// (coprocesses or one-shot commands), task sources, safety limits,
// sessions with memory windowing, Ralph mode and stage pipelines.
package loop

import "fmt"

// State is a state of the loop (the seed's names).
type State string

// The states. done and failed are terminal: the run is over.
const (
	Idle      State = "idle"
	LoadTasks State = "load_tasks"
	PickTask  State = "pick_task"
	Thinking  State = "thinking"
	ToolCall  State = "tool_call"
	Executing State = "executing"
	Observing State = "observing"
	Verify    State = "verify"
	Commit    State = "commit"
	Done      State = "done"
	Failed    State = "failed"
)

// States lists every state in the order of a normal run.
var States = []State{Idle, LoadTasks, PickTask, Thinking, ToolCall, Executing, Observing, Verify, Commit, Done, Failed}

// Input is what happened in a state; with the state it decides the next one.
type Input string

// The inputs.
const (
	Start        Input = "start"         // idle: the run begins
	Loaded       Input = "loaded"        // load_tasks: the task source is ready
	Picked       Input = "picked"        // pick_task: a task was taken
	Empty        Input = "empty"         // pick_task: no task is left
	ToolCalls    Input = "tool_calls"    // thinking: the model asked for tools
	Answer       Input = "answer"        // thinking: the model answered without tool calls
	Truncated    Input = "truncated"     // thinking: the answer was cut off at max_tokens; the model is asked to go on
	Parsed       Input = "parsed"        // tool_call: the calls are checked and ready
	Executed     Input = "executed"      // executing: every call has a result
	Observed     Input = "observed"      // observing: the results are in memory
	VerifyFailed Input = "verify_failed" // verify: not complete yet (verify failed, promise or exit condition missing)
	VerifyPassed Input = "verify_passed" // verify: the task is complete
	Committed    Input = "committed"     // commit: the work is committed (or there was nothing to commit) and the task is closed
	TaskFailed   Input = "task_failed"   // a task-scoped failure or limit: the task is failed, the run goes on
	Fatal        Input = "fatal"         // an unrecoverable failure, a run-scoped limit or a signal: the run stops
)

// Inputs lists every input.
var Inputs = []Input{Start, Loaded, Picked, Empty, ToolCalls, Answer, Truncated, Parsed, Executed, Observed, VerifyFailed, VerifyPassed, Committed, TaskFailed, Fatal}

// inTask are the states in which a task is being worked on.
var inTask = []State{Thinking, ToolCall, Executing, Observing, Verify, Commit}

// table is the set of allowed transitions.
var table = func() map[State]map[Input]State {
	t := map[State]map[Input]State{
		Idle:      {Start: LoadTasks},
		LoadTasks: {Loaded: PickTask},
		PickTask:  {Picked: Thinking, Empty: Done},
		Thinking:  {ToolCalls: ToolCall, Answer: Verify, Truncated: Thinking},
		ToolCall:  {Parsed: Executing},
		Executing: {Executed: Observing},
		Observing: {Observed: Thinking},
		Verify:    {VerifyFailed: Thinking, VerifyPassed: Commit},
		Commit:    {Committed: PickTask},
	}
	for _, s := range inTask {
		t[s][TaskFailed] = PickTask
	}
	for _, s := range States {
		if s.Terminal() {
			continue
		}
		if t[s] == nil {
			t[s] = map[Input]State{}
		}
		t[s][Fatal] = Failed
	}
	return t
}()

// Terminal reports whether the run is over in s.
func (s State) Terminal() bool { return s == Done || s == Failed }

// InTask reports whether a task is being worked on in s.
func (s State) InTask() bool {
	for _, t := range inTask {
		if s == t {
			return true
		}
	}
	return false
}

// TransitionError is an input that is not allowed in a state.
type TransitionError struct {
	From  State
	Input Input
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("loop: input %q is not allowed in state %q", e.Input, e.From)
}

// Next is the transition function: the state that follows s on input in,
// or a *TransitionError. It has no side effects.
func Next(s State, in Input) (State, error) {
	if to, ok := table[s][in]; ok {
		return to, nil
	}
	return s, &TransitionError{From: s, Input: in}
}

// Allowed lists the inputs accepted in s, in the order of Inputs.
func Allowed(s State) []Input {
	var out []Input
	for _, in := range Inputs {
		if _, ok := table[s][in]; ok {
			out = append(out, in)
		}
	}
	return out
}
