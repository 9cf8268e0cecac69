package loop

import (
	"strings"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// InterruptedCall is the result a resumed task gives each tool call the
// stopped run left without one.
const InterruptedCall = "interrupted: pg-loop stopped before this call finished; its effects are unknown"

// resumable reports whether rp holds a conversation of task t to go on
// from. A follow-up task stopped before its prompt was recorded has only
// its base, the earlier task's conversation, ending in that task's final
// answer: it starts again from its prompt.
func resumable(rp *Replay, t *protocol.Task) bool {
	if rp == nil || rp.Current == nil || rp.Current.ID != t.ID || len(rp.Conv) == 0 {
		return false
	}
	return rp.Steps > 0 || rp.Conv[len(rp.Conv)-1].Role != protocol.RoleAssistant
}

// resume takes a task's conversation up from memory where the stopped run
// left it, so that the next request is one a provider accepts: it never
// ends with a turn of the model's. The run stopped
//   - while tools ran (a signal, kill -9, a crash): the model's calls have
//     no results. Each gets an error result saying it was interrupted: the
//     model checks the state rather than trust or repeat a call that may
//     have run in part;
//   - while the final answer was checked or committed: the task goes back
//     to verify with that answer (see thinking), with no new model call.
func (r *Runner) resume(tr *taskRun, rp *Replay) {
	tr.conv, tr.steps, tr.iter = rp.Conv, rp.Steps, rp.Iter
	r.o.Guard.Rebuild(r.sys, tr.conv)
	r.log("info", "resumed task %s with %d messages", tr.task.ID, len(tr.conv))
	last := tr.conv[len(tr.conv)-1]
	if last.Role != protocol.RoleAssistant {
		return
	}
	calls := last.Content.ToolCalls()
	if len(calls) == 0 {
		tr.resumedAnswer = true
		return
	}
	blocks := make(protocol.Content, len(calls))
	names := make([]string, len(calls))
	for i, c := range calls {
		blocks[i] = protocol.Block{Type: protocol.BlockToolResult, ID: c.ID, Output: InterruptedCall, IsError: true}
		names[i] = c.Name
	}
	msg := protocol.Message{Role: protocol.RoleTool, Content: blocks}
	tr.conv = append(tr.conv, msg)
	r.remember(MemoryRecord{Type: MemMessage, Task: tr.task.ID, Message: &msg})
	r.log("warn", "resumed task %s: the run stopped during %d tool calls (%s): each is answered as interrupted, its effects unknown", tr.task.ID, len(calls), strings.Join(names, ", "))
}

// resumedAnswer is the final answer a resumed task stopped in verify or
// commit goes back to check: the text of its last message.
func resumedAnswer(conv []protocol.Message) string {
	return conv[len(conv)-1].Content.Text()
}
