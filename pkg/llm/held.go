package llm

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// Held is what pg-llm serve keeps of the conversations it answered, so a
// client sends only what is new (docs/protocol.md, "Held conversations"):
// each answered request's messages and its answer, with its system prompt
// and tools, under a name the end event gives (held), which a later
// request names (after) to send only the messages that follow, and
// neither system prompt nor tools when they stay the same. The last
// MaxHeld conversations are kept.
type Held struct {
	mu    sync.Mutex
	n     int
	convs map[string]*heldConv
	use   int
}

type heldConv struct {
	msgs   []protocol.Message
	system string
	tools  []protocol.ToolDef
	used   int
	// spare is set while nothing uses the capacity of msgs past its end:
	// the next request that continues the conversation appends there
	// instead of copying the conversation (which would make every step
	// cost as much as the conversation is long).
	spare bool
}

// MaxHeld is how many conversations a Held keeps: a client continues the
// one it was answered last, so a few are plenty even for several clients.
const MaxHeld = 16

// Expand turns a request that continues a held conversation into the
// whole request: the held messages, then the request's; the held system
// prompt and tools where the request leaves them out. A request without
// after is left as it is; one whose conversation is not held gets an
// *Error of kind not_held.
func (h *Held) Expand(req *protocol.Request) error {
	if req.After == "" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.convs[req.After]
	if c == nil {
		return &Error{Kind: protocol.KindNotHeld, Message: fmt.Sprintf("conversation %q is not held (pg-llm serve keeps the last %d): send the whole request", req.After, MaxHeld)}
	}
	h.use++
	c.used = h.use
	if c.spare {
		req.Messages = append(c.msgs, req.Messages...)
		c.spare = false
	} else {
		req.Messages = append(c.msgs[:len(c.msgs):len(c.msgs)], req.Messages...)
	}
	if req.System == "" {
		req.System = c.system
	}
	if len(req.Tools) == 0 {
		req.Tools = c.tools
	}
	req.After = ""
	return nil
}

// Hold keeps the conversation of a whole request and its answer, and
// names it in the end event.
func (h *Held) Hold(req *protocol.Request, end *protocol.EndEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.convs == nil {
		h.convs = map[string]*heldConv{}
	}
	if len(h.convs) >= MaxHeld {
		oldest := ""
		for k, c := range h.convs {
			if oldest == "" || c.used < h.convs[oldest].used {
				oldest = k
			}
		}
		delete(h.convs, oldest)
	}
	h.n++
	h.use++
	name := "h" + strconv.Itoa(h.n)
	// The request's messages are its own (decoded for it, or appended
	// for it by Expand, which then took the spare capacity from the
	// conversation it continued): the answer goes after them in place.
	h.convs[name] = &heldConv{msgs: append(req.Messages, end.Message),
		system: req.System, tools: req.Tools, used: h.use, spare: true}
	end.Held = name
}
