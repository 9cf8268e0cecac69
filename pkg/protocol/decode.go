package protocol

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// UnknownTypeError reports a record whose type the reader does not know.
type UnknownTypeError struct {
	Family string
	Type   string
}

func (e *UnknownTypeError) Error() string {
	if e.Type == "" {
		return fmt.Sprintf("%s record has no \"type\" field", e.Family)
	}
	return fmt.Sprintf("unknown %s record type %q", e.Family, e.Type)
}

// BadInput marks the error as bad input (exit 2).
func (e *UnknownTypeError) BadInput() bool { return true }

// Family is a set of record types that share a stream, told apart by their
// "type" field.
type Family struct {
	Name  string
	types map[string]func() any
}

func family(name string, types map[string]func() any) *Family {
	return &Family{Name: name, types: types}
}

// Types lists the record types of the family.
func (f *Family) Types() []string {
	out := make([]string, 0, len(f.types))
	for t := range f.types {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// New returns a new zero record of type t, or nil.
func (f *Family) New(t string) any {
	if mk, ok := f.types[t]; ok {
		return mk()
	}
	return nil
}

// Decode reads one record. Fields the type does not know are allowed
// (records may gain fields); an unknown type is an *UnknownTypeError.
func (f *Family) Decode(line []byte) (any, error) {
	t, err := TypeOf(line)
	if err != nil {
		return nil, err
	}
	v := f.New(t)
	if v == nil {
		return nil, &UnknownTypeError{Family: f.Name, Type: t}
	}
	if err := json.Unmarshal(line, v); err != nil {
		return nil, fmt.Errorf("%s record %q: %w", f.Name, t, err)
	}
	return v, nil
}

// TypeOf reads the "type" field of a JSON object.
func TypeOf(line []byte) (string, error) {
	var head struct {
		Type *string `json:"type"`
	}
	t := bytes.TrimSpace(line)
	if len(t) == 0 || t[0] != '{' {
		return "", errors.New("record is not a JSON object")
	}
	if err := json.Unmarshal(t, &head); err != nil {
		return "", fmt.Errorf("invalid record: %w", err)
	}
	if head.Type == nil {
		return "", &UnknownTypeError{Family: "protocol"}
	}
	return *head.Type, nil
}

// The record families.
var (
	ModelEvents = family("model-event", map[string]func() any{
		EventStart:    func() any { return &StartEvent{} },
		EventText:     func() any { return &TextEvent{} },
		EventThinking: func() any { return &ThinkingEvent{} },
		EventToolCall: func() any { return &ToolCallEvent{} },
		EventUsage:    func() any { return &UsageEvent{} },
		EventRetry:    func() any { return &RetryEvent{} },
		EventFallback: func() any { return &FallbackEvent{} },
		EventError:    func() any { return &ErrorEvent{} },
		EventEnd:      func() any { return &EndEvent{} },
		"models":      func() any { return &ModelsEvent{} },
	})
	LoopEvents = family("loop-event", map[string]func() any{
		LoopState:      func() any { return &LoopStateEvent{} },
		LoopAssistant:  func() any { return &LoopAssistantEvent{} },
		LoopToolCall:   func() any { return &LoopToolCallEvent{} },
		LoopToolResult: func() any { return &LoopToolResultEvent{} },
		LoopVerify:     func() any { return &LoopVerifyEvent{} },
		LoopCommit:     func() any { return &LoopCommitEvent{} },
		LoopLimit:      func() any { return &LoopLimitEvent{} },
		LoopTask:       func() any { return &LoopTaskEvent{} },
		LoopLog:        func() any { return &LoopLogEvent{} },
		LoopSummary:    func() any { return &LoopSummaryEvent{} },
		LoopGuard:      func() any { return &LoopGuardEvent{} },
		LoopApproval:   func() any { return &LoopApprovalEvent{} },
		LoopReply:      func() any { return &ServeReply{} },
		EventError:     func() any { return &ErrorEvent{} },
	})
	JournalEvents = family("journal-event", map[string]func() any{
		JournalTask:    func() any { return &TaskEvent{} },
		JournalWorker:  func() any { return &WorkerEvent{} },
		JournalMonitor: func() any { return &MonitorEvent{} },
	})
	ToolOutputs = family("tool-output", map[string]func() any{
		"result":   func() any { return &ToolResult{} },
		"tools":    func() any { return &ToolsEvent{} },
		EventError: func() any { return &ErrorEvent{} },
	})
)

// DecodeRequest reads a model request strictly: unknown fields are errors
// that name the field, and the request is validated.
//
// The blocks of each message are read strictly too: a block with a field
// that does not exist (say "content" for a tool_result's "output") would
// otherwise lose what it says without a word.
func DecodeRequest(data []byte) (*Request, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Request
	w := requestWire{Request: &r}
	if err := dec.Decode(&w); err != nil {
		return nil, requestError(err)
	}
	if dec.More() {
		return nil, FieldError{Field: "(request)", Msg: "unexpected data after the request"}
	}
	if w.Messages != nil {
		msgs, err := decodeMessages(w.Messages)
		if err != nil {
			return nil, err
		}
		r.Messages = msgs
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// requestWire is how DecodeRequest reads a request: the fields of Request,
// but each message's content raw, for decodeMessages. (The shallower
// messages field wins over the embedded one.)
type requestWire struct {
	*Request
	Messages []messageWire `json:"messages"`
}

type messageWire struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// decodeMessages reads the messages' contents: strings directly, and the
// block arrays all at once, with one strict decoder over a list of them
// (a decoder per message would cost more than the decoding). When that
// fails, blockError finds the message and the block at fault.
func decodeMessages(ws []messageWire) ([]Message, error) {
	out := make([]Message, len(ws))
	var buf []byte
	var arrays []int // indexes of the messages whose content is an array
	for i, m := range ws {
		out[i].Role = m.Role
		t := bytes.TrimSpace(m.Content)
		if len(t) > 0 && t[0] == '[' {
			if len(arrays) == 0 {
				buf = append(buf, '[')
			} else {
				buf = append(buf, ',')
			}
			buf = append(buf, t...)
			arrays = append(arrays, i)
			continue
		}
		c, err := scalarContent(t, contentField(i))
		if err != nil {
			return nil, err
		}
		out[i].Content = c
	}
	if len(arrays) == 0 {
		return out, nil
	}
	buf = append(buf, ']')
	var all [][]Block
	if err := strictUnmarshal(buf, &all); err != nil {
		for _, i := range arrays {
			if err := blockError(ws[i].Content, contentField(i)); err != nil {
				return nil, err
			}
		}
		return nil, FieldError{Field: "messages", Msg: "invalid content: " + err.Error()}
	}
	for j, i := range arrays {
		out[i].Content = all[j]
	}
	return out, nil
}

func contentField(i int) string { return fmt.Sprintf("messages[%d].content", i) }

// scalarContent reads a content that is not an array of blocks: absent,
// null, or a string (one text block).
func scalarContent(t []byte, field string) (Content, error) {
	switch {
	case len(t) == 0 || string(t) == "null":
		return nil, nil
	case t[0] == '"':
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return nil, FieldError{Field: field, Msg: "invalid JSON: " + err.Error()}
		}
		return Content{{Type: BlockText, Text: s}}, nil
	}
	return nil, FieldError{Field: field, Msg: "expected a string or an array of blocks"}
}

// blockError names the first block of an array that does not decode
// strictly, with the field at fault; nil when every block does.
func blockError(raw json.RawMessage, field string) error {
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return FieldError{Field: field, Msg: "invalid JSON: " + err.Error()}
	}
	for j, rb := range raws {
		var b Block
		if err := strictUnmarshal(rb, &b); err != nil {
			at := fmt.Sprintf("%s[%d]", field, j)
			var fe FieldError
			if errors.As(requestError(err), &fe) && fe.Field != "(request)" && fe.Field != "" {
				return FieldError{Field: at + "." + fe.Field, Msg: fe.Msg}
			}
			return FieldError{Field: at, Msg: "expected a block object"}
		}
	}
	return nil
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func requestError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// Fields of the Request embedded in requestWire come out as
		// Request.max_tokens.
		return FieldError{Field: strings.TrimPrefix(te.Field, "Request."), Msg: fmt.Sprintf("expected %s, got %s", te.Type, te.Value)}
	}
	if s := err.Error(); strings.HasPrefix(s, "json: unknown field ") {
		return FieldError{Field: strings.Trim(strings.TrimPrefix(s, "json: unknown field "), `"`), Msg: "unknown field"}
	}
	return FieldError{Field: "(request)", Msg: "invalid JSON: " + err.Error()}
}

//go:embed schemas/*.json
var schemaFS embed.FS

// SchemaNames lists the embedded JSON Schemas.
func SchemaNames() []string {
	entries, _ := fs.ReadDir(schemaFS, "schemas")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	return out
}

// Schema returns the JSON Schema called name.
func Schema(name string) ([]byte, error) {
	b, err := schemaFS.ReadFile("schemas/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("no schema %q (known: %s)", name, strings.Join(SchemaNames(), ", "))
	}
	return b, nil
}
