package llm

import (
	"fmt"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

func textMsg(role, text string) protocol.Message {
	return protocol.Message{Role: role, Content: protocol.Content{{Type: "text", Text: text}}}
}

func texts(msgs []protocol.Message) string {
	var s string
	for _, m := range msgs {
		s += m.Content.Text() + " "
	}
	return s
}

// TestHeldContinuedTwice: a conversation is continued in place by the
// request after it, without copying it; a second request that continues
// the same conversation (a client that retries, or two that share it) gets
// its own copy, and neither sees the other's messages.
func TestHeldContinuedTwice(t *testing.T) {
	var h Held
	first := &protocol.Request{Messages: []protocol.Message{textMsg("user", "u1")}}
	end := &protocol.EndEvent{Message: textMsg("assistant", "a1")}
	h.Hold(first, end)
	held := end.Held
	grow := func(text string) *protocol.Request {
		req := &protocol.Request{After: held, Messages: []protocol.Message{textMsg("user", text)}}
		if err := h.Expand(req); err != nil {
			t.Fatal(err)
		}
		return req
	}
	a := grow("u2")
	b := grow("u2b")
	endA := &protocol.EndEvent{Message: textMsg("assistant", "a2")}
	h.Hold(a, endA)
	endB := &protocol.EndEvent{Message: textMsg("assistant", "a2b")}
	h.Hold(b, endB)
	if got := texts(a.Messages); got != "u1 a1 u2 " {
		t.Errorf("first continuation: %q", got)
	}
	if got := texts(b.Messages); got != "u1 a1 u2b " {
		t.Errorf("second continuation: %q", got)
	}
	for name, want := range map[string]string{endA.Held: "u1 a1 u2 a2 ", endB.Held: "u1 a1 u2b a2b "} {
		req := &protocol.Request{After: name, Messages: []protocol.Message{textMsg("user", "next")}}
		if err := h.Expand(req); err != nil {
			t.Fatal(err)
		}
		if got := texts(req.Messages); got != want+"next " {
			t.Errorf("%s continued: %q, want %q", name, got, want+"next ")
		}
	}
}

// BenchmarkHeldStep is what serve's held conversations cost a step of a
// long conversation: the request that continues it and the answer held.
func BenchmarkHeldStep(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("msgs=%d", n), func(b *testing.B) {
			var h Held
			msgs := make([]protocol.Message, n)
			for i := range msgs {
				msgs[i] = textMsg("user", "m")
			}
			end := &protocol.EndEvent{Message: textMsg("assistant", "a")}
			h.Hold(&protocol.Request{Messages: msgs}, end)
			for b.Loop() {
				req := &protocol.Request{After: end.Held, Messages: []protocol.Message{textMsg("user", "next")}}
				if err := h.Expand(req); err != nil {
					b.Fatal(err)
				}
				end = &protocol.EndEvent{Message: textMsg("assistant", "a")}
				h.Hold(req, end)
			}
		})
	}
}
