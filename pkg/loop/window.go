package loop

import (
	"fmt"
	"strings"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// prunedMin is the size under which a tool output is kept even when old.
const prunedMin = 256

// EstimateTokens estimates the tokens of a request: about four bytes of
// its JSON per token, which overestimates prose and code a little, the
// safe side for a window check. It sums the sizes without encoding (the
// request is encoded once, to be sent).
func EstimateTokens(req *protocol.Request) int {
	n := 64 + len(req.System) + len(req.Model)
	for _, t := range req.Tools {
		n += 48 + len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	for _, m := range req.Messages {
		n += 32
		for _, b := range m.Content {
			n += 24 + len(b.Text) + len(b.ID) + len(b.Name) + len(b.Input) + len(b.Output) + len(b.Thinking) + len(b.Signature) + len(b.Data)
			// escaped characters take more than one byte in JSON
			n += strings.Count(b.Text, "\n") + strings.Count(b.Output, "\n")
		}
	}
	return n/4 + 1
}

// pruneBefore replaces the output of tool results in msgs[:before] with a
// short marker. It returns a new slice; msgs is not changed.
func pruneBefore(msgs []protocol.Message, before int) []protocol.Message {
	if before > len(msgs) {
		before = len(msgs)
	}
	out := make([]protocol.Message, len(msgs))
	copy(out, msgs)
	for i := 0; i < before; i++ {
		m := out[i]
		changed := false
		blocks := make(protocol.Content, len(m.Content))
		for j, b := range m.Content {
			if b.Type == protocol.BlockToolResult && len(b.Output) > prunedMin && !strings.HasPrefix(b.Output, "[pruned") {
				b.Output = fmt.Sprintf("[pruned: %d bytes of old tool output]", len(b.Output))
				changed = true
			}
			blocks[j] = b
		}
		if changed {
			out[i] = protocol.Message{Role: m.Role, Content: blocks}
		}
	}
	return out
}

// applySummary keeps the first message (the task) and msgs[keepFrom:],
// and folds the summary of what lies between into the first message.
func applySummary(msgs []protocol.Message, keepFrom int, summary string) []protocol.Message {
	if len(msgs) == 0 || keepFrom < 1 || keepFrom > len(msgs) {
		return msgs
	}
	first := msgs[0]
	text := first.Content.Text() + "\n\n## Summary of the earlier work on this task\n\n" + summary
	out := []protocol.Message{{Role: protocol.RoleUser, Content: protocol.Content{{Type: protocol.BlockText, Text: text}}}}
	return append(out, msgs[keepFrom:]...)
}

// summaryCut picks where the kept recent turns start: an assistant message
// at least keep messages from the end, so no tool result loses its call.
// It returns 0 when there is nothing old enough to summarize.
func summaryCut(msgs []protocol.Message, keep int) int {
	for i := len(msgs) - keep; i >= 2; i-- {
		if msgs[i].Role == protocol.RoleAssistant {
			return i
		}
	}
	return 0
}

// transcript renders messages as plain text for the summarizer.
func transcript(msgs []protocol.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		for _, bl := range m.Content {
			switch bl.Type {
			case protocol.BlockText:
				fmt.Fprintf(&b, "[%s] %s\n", m.Role, bl.Text)
			case protocol.BlockToolCall:
				fmt.Fprintf(&b, "[%s called %s] %s\n", m.Role, bl.Name, bl.Input)
			case protocol.BlockToolResult:
				out := bl.Output
				if len(out) > 2000 {
					out = out[:1000] + "\n...\n" + out[len(out)-1000:]
				}
				status := "ok"
				if bl.IsError {
					status = "error"
				}
				fmt.Fprintf(&b, "[tool result, %s] %s\n", status, out)
			}
		}
	}
	return b.String()
}

const summarizeSystem = "You compress the history of a coding agent's work so it can continue with less context. " +
	"Write a concise summary: what was done, which files were changed and how, what was learned, what failed, and what remains. " +
	"Keep exact file names, commands and error messages that still matter. Do not call tools."
