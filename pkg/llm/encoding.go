package llm

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"sync"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// An agent's conversation grows by a message or two per call, and every
// call sends it whole. A provider keeps the wire encoding of the messages
// it sent last in an encodingCache, so a call encodes only what is new and
// copies the rest: the cost of a request grows with the bytes sent, not
// with a JSON encoder's work over the whole conversation.

// wireMessage is the encoding of one message in a provider's format.
type wireMessage struct {
	b []byte // the provider's JSON for the message; empty: nothing is sent
	// last is a provider's note on the message's last element (Anthropic:
	// whether its last block can carry a cache breakpoint).
	last bool
}

// encodeFunc encodes one message for a provider.
type encodeFunc func(m *protocol.Message) (wireMessage, error)

type cachedMessage struct {
	msg  protocol.Message
	wire wireMessage
	gen  uint64
}

// encodingCache maps messages to their encodings. A message is found by a
// hash of its content and confirmed equal field by field, so a hash
// collision costs an encoding, never a wrong message. Entries a call did
// not use are dropped once the cache holds many more than a call needs.
type encodingCache struct {
	mu   sync.Mutex
	seed maphash.Seed
	m    map[uint64]*cachedMessage
	gen  uint64
	// last holds the entries of the last call in its order: a call that
	// extends the conversation finds its earlier messages at the same
	// places, confirmed equal without hashing them (an equal string
	// shares its bytes with the cached copy and compares at once).
	last  []*cachedMessage
	tools struct { // the tool definitions of the last call, encoded
		defs []protocol.ToolDef
		b    []byte
	}
	system struct { // the system prompt of the last call, encoded
		text  string
		cache bool
		b     []byte
	}
}

func newEncodingCache() *encodingCache {
	return &encodingCache{seed: maphash.MakeSeed(), m: map[uint64]*cachedMessage{}}
}

// messages returns the encoding of each message, from the cache where it
// can.
func (c *encodingCache) messages(msgs []protocol.Message, enc encodeFunc) ([]wireMessage, error) {
	out := make([]wireMessage, len(msgs))
	used := make([]*cachedMessage, len(msgs))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for i := range msgs {
		m := &msgs[i]
		if i < len(c.last) && c.last[i].msg.Equal(m) {
			used[i] = c.last[i]
		} else if e := c.m[c.hash(m)]; e != nil && e.msg.Equal(m) {
			used[i] = e
		} else {
			w, err := enc(m)
			if err != nil {
				return nil, err
			}
			used[i] = &cachedMessage{msg: cloneMessage(m), wire: w}
			c.m[c.hash(m)] = used[i]
		}
		used[i].gen = c.gen
		out[i] = used[i].wire
	}
	c.last = used
	if len(c.m) > 2*len(msgs)+256 {
		for h, e := range c.m {
			if e.gen != c.gen {
				delete(c.m, h)
			}
		}
	}
	return out, nil
}

// toolDefs returns the encoding of the tool definitions, the last call's
// when they are the same.
func (c *encodingCache) toolDefs(defs []protocol.ToolDef, enc func([]protocol.ToolDef) ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tools.b != nil && toolDefsEqual(c.tools.defs, defs) {
		return c.tools.b, nil
	}
	b, err := enc(defs)
	if err != nil {
		return nil, err
	}
	c.tools.defs = make([]protocol.ToolDef, len(defs))
	for i, d := range defs {
		d.InputSchema = bytes.Clone(d.InputSchema)
		c.tools.defs[i] = d
	}
	c.tools.b = b
	return b, nil
}

// systemPrompt returns the encoding of the system prompt (with a cache
// breakpoint when cache is set), the last call's when it is the same: a
// prompt with the project's context files runs to kilobytes, which the
// encoder would scan for characters to escape every call.
func (c *encodingCache) systemPrompt(text string, cache bool, enc func(string, bool) ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.system.b != nil && c.system.text == text && c.system.cache == cache {
		return c.system.b, nil
	}
	b, err := enc(text, cache)
	if err != nil {
		return nil, err
	}
	c.system.text, c.system.cache, c.system.b = text, cache, b
	return b, nil
}

func (c *encodingCache) hash(m *protocol.Message) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(m.Role)
	for i := range m.Content {
		b := &m.Content[i]
		for _, s := range [...]string{b.Type, b.Text, b.ID, b.Name, b.Output, b.Thinking, b.Signature, b.Data} {
			h.WriteByte(0)
			h.WriteString(s)
		}
		h.WriteByte(0)
		h.Write(b.Input)
		if b.IsError {
			h.WriteByte(1)
		}
	}
	return h.Sum64()
}

// cloneMessage copies what a caller could change in place: the blocks and
// their input bytes (strings cannot change).
func cloneMessage(m *protocol.Message) protocol.Message {
	c := protocol.Message{Role: m.Role, Content: append(protocol.Content(nil), m.Content...)}
	for i := range c.Content {
		if c.Content[i].Input != nil {
			c.Content[i].Input = bytes.Clone(c.Content[i].Input)
		}
	}
	return c
}

func toolDefsEqual(a, b []protocol.ToolDef) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description || !bytes.Equal(a[i].InputSchema, b[i].InputSchema) {
			return false
		}
	}
	return true
}

// appendJSON appends the JSON of v, without HTML escaping and without the
// encoder's newline.
func appendJSON(dst []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return dst, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
