package dash

import (
	"context"
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
// selected worker through the team's store, as pg-loop approve does (from
// any host, on a shared store).

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
	return stWarn.Render(fit(termtext.Line(s), w))
}

// approvalKeys answers the selected worker's pending call with y or n.
func (m *Model) approvalKeys(msg tea.KeyPressMsg) (tea.Cmd, bool) {
	a := m.pendingApproval()
	if a == nil || !key.Matches(msg, approveKey, denyKey) {
		return nil, false
	}
	id := m.selected().Worker.Worker
	m.answered[id] = a.Call
	ans := protocol.ApprovalAnswer{Worker: id, Call: a.Call, Approved: key.Matches(msg, approveKey), By: "pg-dash", TS: time.Now().UTC()}
	if !ans.Approved {
		ans.Reason = "denied in pg-dash"
	}
	t := m.loader.team()
	return func() tea.Msg {
		if err := t.Workers().Answer(context.Background(), ans); err != nil {
			return actionMsg{text: fmt.Sprintf("answer worker %s: %v", id, err), tone: "bad", worker: id}
		}
		verb := "approved"
		if !ans.Approved {
			verb = "denied"
		}
		return actionMsg{text: fmt.Sprintf("worker %s: %s call %s (%s)", id, verb, a.Call, a.Tool), tone: "ok", worker: id}
	}, true
}
