package dash

import (
	"fmt"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// A worker started with pg-loop --ask waits on a tool call until someone
// answers: its record holds the call (protocol.PendingApproval), the
// workers table shows it as "approval?", and y or n answer it for the
// selected worker, as pg-loop approve does.

var (
	approveKey = key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "approve"))
	denyKey    = key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "deny"))
)

// pendingApproval is the approval the selected worker waits on and no key
// has answered yet, or nil.
func (m *Model) pendingApproval() *protocol.PendingApproval {
	w := m.selected()
	if w == nil || w.Approval == nil || w.Finished() || m.opt.Stream != nil {
		return nil
	}
	if m.answered[w.Worker.Worker] == w.Approval.Call {
		return nil
	}
	return w.Approval
}

// waitsForApproval reports whether a worker's row shows it waiting.
func waitsForApproval(w WorkerInfo) bool { return w.Approval != nil && !w.Finished() }

// approvalLine asks about the selected worker's pending call.
func (m *Model) approvalLine(w int) string {
	a := m.pendingApproval()
	if a == nil {
		return ""
	}
	sel := m.selected().Worker
	s := fmt.Sprintf("worker %s asks to run %s %s (--ask %s): y approve, n deny", sel.Worker, a.Tool, a.Input, a.Pattern)
	if !m.answerable(sel) {
		s = fmt.Sprintf("worker %s asks to run %s %s (--ask %s): answer it on its host %q", sel.Worker, a.Tool, a.Input, a.Pattern, sel.Host)
	}
	return stWarn.Render(fit(termtext.Line(s), w))
}

// answerable reports whether this pg-dash can answer the worker: the
// answer is a file in the worker's own team directory, which only its
// host reads (with a shared store too).
func (m *Model) answerable(rec protocol.Worker) bool {
	return m.opt.Host != "" && rec.Host == m.opt.Host
}

// approvalKeys answers the selected worker's pending call with y or n.
func (m *Model) approvalKeys(msg tea.KeyPressMsg) (tea.Cmd, bool) {
	a := m.pendingApproval()
	if a == nil || !key.Matches(msg, approveKey, denyKey) {
		return nil, false
	}
	rec := m.selected().Worker
	id := rec.Worker
	if !m.answerable(rec) {
		return nil, true // the line says where to answer it
	}
	m.answered[id] = a.Call
	ans := protocol.ApprovalAnswer{Worker: id, Call: a.Call, Approved: key.Matches(msg, approveKey), By: "pg-dash", TS: time.Now().UTC()}
	if !ans.Approved {
		ans.Reason = "denied in pg-dash"
	}
	d := m.opt.Dir
	return func() tea.Msg {
		if err := d.Answer(ans, &rec); err != nil {
			return actionMsg{text: fmt.Sprintf("answer worker %s: %v", id, err), tone: "bad", worker: id}
		}
		verb := "approved"
		if !ans.Approved {
			verb = "denied"
		}
		return actionMsg{text: fmt.Sprintf("worker %s: %s call %s (%s)", id, verb, a.Call, a.Tool), tone: "ok", worker: id}
	}, true
}
