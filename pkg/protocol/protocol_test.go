package protocol_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/protocol/validate"
)

var ts = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func errStr(s string) *string { return &s }

// samples holds one filled-in record of every type, by schema.
var samples = []struct {
	schema string
	v      any
}{
	{"model-event", &protocol.StartEvent{Type: "start", ID: "r1", Provider: "anthropic", Model: "claude-sonnet-4-5", RequestID: "msg_01"}},
	{"model-event", &protocol.TextEvent{Type: "text", Text: "hello <world> & co"}},
	{"model-event", &protocol.ThinkingEvent{Type: "thinking", Text: "hmm"}},
	{"model-event", &protocol.ToolCallEvent{Type: "tool_call", Call: protocol.ToolCall{ID: "tc1", Name: "read", Input: json.RawMessage(`{"path":"a.go"}`)}}},
	{"model-event", &protocol.UsageEvent{Type: "usage", Usage: protocol.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.001}}},
	{"model-event", &protocol.RetryEvent{Type: "retry", Attempt: 2, DelayMS: 1500, Reason: "429 rate_limit"}},
	{"model-event", &protocol.FallbackEvent{Type: "fallback", From: "anthropic/a", To: "openai/b", Reason: "overloaded"}},
	{"model-event", &protocol.ErrorEvent{Type: "error", Kind: "overloaded", Message: "Overloaded", Retryable: true, Status: 529}},
	{"model-event", &protocol.EndEvent{Type: "end", StopReason: "tool_use", Message: protocol.Message{Role: "assistant", Content: protocol.Content{
		{Type: "thinking", Thinking: "plan", Signature: "sig=="},
		{Type: "text", Text: "Reading."},
		{Type: "tool_call", ID: "tc1", Name: "read", Input: json.RawMessage(`{"path":"a.go"}`)},
	}}, Usage: protocol.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, CostUSD: 0.5}}},
	{"request", &protocol.Request{ID: "r1", Model: "anthropic/claude-sonnet-4-5", System: "be brief", MaxTokens: 100, Cache: true,
		Temperature: new(float64), Thinking: &protocol.Thinking{BudgetTokens: 1024},
		Messages: []protocol.Message{
			{Role: "user", Content: protocol.Content{{Type: "text", Text: "hi"}}},
			{Role: "assistant", Content: protocol.Content{{Type: "tool_call", ID: "t1", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)}}},
			{Role: "tool", Content: protocol.Content{{Type: "tool_result", ID: "t1", Output: "a.go", IsError: false}}},
		},
		Tools: []protocol.ToolDef{{Name: "bash", Description: "run", InputSchema: json.RawMessage(`{"type":"object"}`)}}}},
	{"tool-call", &protocol.ToolCall{ID: "c1", Name: "read", Input: json.RawMessage(`{"path":"x"}`)}},
	{"tool-result", &protocol.ToolResult{Type: "result", ID: "c1", Name: "read", OK: false, Error: errStr("no such file"), DurationMS: 3}},
	{"tool-output", &protocol.ToolResult{Type: "result", ID: "c1", Name: "read", OK: true, Output: "1\tx", Truncated: true, FullOutput: "/tmp/o"}},
	{"task", &protocol.Task{ID: "t-1", Title: "fix", Status: "claimed", DependsOn: []string{}, Labels: map[string]string{"area": "x"},
		MaxAttempts: 3, Claim: &protocol.Claim{Worker: "3", Token: 17, Until: ts}, CreatedAt: ts, UpdatedAt: ts}},
	{"task", &protocol.Task{ID: "t-2", Title: "done", Status: "done", DependsOn: []string{"t-1"}, Labels: map[string]string{},
		Result: json.RawMessage(`{"summary":"ok"}`), CreatedAt: ts, UpdatedAt: ts}},
	{"task-input", &protocol.TaskInput{Title: "fix"}},
	{"task-input", &protocol.TaskInput{Prompt: "fix the flaky test"}},
	{"task-input", &protocol.TaskInput{ID: "t-3", Title: "fix", Prompt: "p", Priority: 2, DependsOn: []string{"t-1"}, Labels: map[string]string{"a": "b"},
		Verify: "true", MaxAttempts: 5, Status: json.RawMessage(`"done"`), Attempts: json.RawMessage(`1`)}},
	{"worker", &protocol.Worker{Worker: "3", PID: 4242, PIDStart: "123", Host: "box", Epoch: 2, State: "executing", Task: "t-1", Step: 17,
		HeartbeatAt: ts, ProgressAt: ts, StartedAt: ts, Velocity: 1, LastTool: "bash", LastError: errStr("boom")}},
	{"journal-event", &protocol.TaskEvent{Type: "task", TS: ts, Op: "claim", Task: "t-1", Worker: "3", Token: 17, Status: "claimed"}},
	{"journal-event", &protocol.WorkerEvent{Type: "worker", TS: ts, Worker: "3", Op: "state", State: "thinking"}},
	{"journal-event", &protocol.MonitorEvent{Type: "monitor", TS: ts, Action: "sigterm", Worker: "3", PID: 4242, Reason: "heartbeat stale for 45s"}},
	{"loop-event", &protocol.LoopStateEvent{Type: "state", TS: ts, Step: 1, From: "idle", To: "load_tasks"}},
	{"loop-event", &protocol.LoopAssistantEvent{Type: "assistant", TS: ts, Step: 2, Text: "done"}},
	{"loop-event", &protocol.LoopToolCallEvent{Type: "tool_call", TS: ts, Step: 2, Call: protocol.ToolCall{ID: "c", Name: "ls"}}},
	{"loop-event", &protocol.LoopToolResultEvent{Type: "tool_result", TS: ts, Step: 2, Result: protocol.ToolResult{Type: "result", ID: "c", Name: "ls", OK: true}}},
	{"loop-event", &protocol.LoopVerifyEvent{Type: "verify", TS: ts, Command: "go test ./...", OK: false, ExitCode: 1, Output: "FAIL", Attempt: 1}},
	{"loop-event", &protocol.LoopCommitEvent{Type: "commit", TS: ts, Hash: "abc123", Message: "fix"}},
	{"loop-event", &protocol.LoopLimitEvent{Type: "limit", TS: ts, Limit: "steps", Reason: "200 steps"}},
	{"loop-event", &protocol.LoopTaskEvent{Type: "task", TS: ts, Task: "t-1", Status: "done"}},
	{"loop-event", &protocol.LoopLogEvent{Type: "log", TS: ts, Level: "warn", Message: "slow"}},
	{"loop-event", &protocol.LoopGuardEvent{Type: "guard", TS: ts, Step: 3, Mode: "strict", Action: "refused", Kind: "url", Tool: "bash", CallID: "c1", Match: "https://evil.example/x", Source: "mcp__web__fetch"}},
	{"error", &protocol.ErrorEvent{Type: "error", Tool: "pg-queue", Kind: "usage", Message: "bad", Line: 3, ExitCode: 2}},
	{"queue-stats", &protocol.QueueStats{Type: "stats", TS: ts, Live: 3, Pending: 1, Claimed: 1, Done: 4, Archived: 3, Claimable: 1,
		OldestPending: "t-1", OldestPendingAge: 1.5, NextToken: 18, Throughput: protocol.QueueThroughput{Last1m: 1, Last5m: 2, Last15m: 3, PerMinute: 0.4}}},
	{"queue-count", &protocol.QueueCount{Type: "prune", Count: 7}},
	{"queue-init", &protocol.StoreInit{Type: "init", Store: "file", Team: "t", Dir: "/h/teams/t"}},
	{"store-agent-hello", &protocol.StoreAgentHello{Type: "hello", Protocol: 1, Store: "postgres", PID: 4242}},
	{"store-agent-request", &protocol.StoreAgentRequest{ID: 7, Op: "complete", Team: "t", Task: "t-1", Token: 17, Result: json.RawMessage(`{"ok":true}`)}},
	{"store-agent-response", &protocol.StoreAgentResponse{ID: 7, Error: &protocol.StoreAgentError{Kind: "lease_lost", Message: "task t-1: lease lost"}}},
}

func TestSamplesValidateAndRoundTrip(t *testing.T) {
	families := map[string]*protocol.Family{
		"model-event": protocol.ModelEvents, "loop-event": protocol.LoopEvents,
		"journal-event": protocol.JournalEvents, "tool-output": protocol.ToolOutputs,
	}
	for _, s := range samples {
		b, err := json.Marshal(s.v)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate.JSON(s.schema, b); err != nil {
			t.Errorf("%T does not validate as %s: %v\n%s", s.v, s.schema, err, b)
		}
		var got any
		if f, ok := families[s.schema]; ok {
			got, err = f.Decode(b)
		} else {
			got = reflect.New(reflect.TypeOf(s.v).Elem()).Interface()
			err = json.Unmarshal(b, got)
		}
		if err != nil {
			t.Errorf("%T: decode: %v", s.v, err)
			continue
		}
		b2, _ := json.Marshal(got)
		if string(b) != string(b2) {
			t.Errorf("%T does not round-trip:\n%s\n%s", s.v, b, b2)
		}
	}
}

func TestSchemasRejectWrongRecords(t *testing.T) {
	bad := []struct{ schema, doc string }{
		{"model-event", `{"type":"text"}`},                              // text missing
		{"model-event", `{"type":"nope","text":"x"}`},                   // unknown type
		{"task", `{"id":"t","title":"x","status":"weird"}`},             // bad status, missing fields
		{"task-input", `{"priority":1}`},                                // no title, no prompt
		{"task-input", `{"title":"x","verfy":"true"}`},                  // a typo
		{"tool-result", `{"type":"result","id":"1","name":"x","ok":1}`}, // ok not a boolean
		{"request", `{"messages":[{"role":"system","content":"x"}]}`},   // bad role
	}
	for _, c := range bad {
		if err := validate.JSON(c.schema, []byte(c.doc)); err == nil {
			t.Errorf("%s accepted %s", c.schema, c.doc)
		}
	}
}

func TestUnknownTypesAreReported(t *testing.T) {
	_, err := protocol.ModelEvents.Decode([]byte(`{"type":"telemetry","x":1}`))
	var ute *protocol.UnknownTypeError
	if !errors.As(err, &ute) || ute.Type != "telemetry" || ute.Family != "model-event" {
		t.Fatalf("got %v", err)
	}
	if _, err := protocol.JournalEvents.Decode([]byte(`{"op":"claim"}`)); !errors.As(err, &ute) || !strings.Contains(err.Error(), `no "type"`) {
		t.Fatalf("missing type: %v", err)
	}
	if _, err := protocol.LoopEvents.Decode([]byte(`[1]`)); err == nil {
		t.Fatal("an array was decoded as a record")
	}
	// Added fields are fine: records may grow.
	v, err := protocol.ModelEvents.Decode([]byte(`{"type":"text","text":"a","new_field":true}`))
	if err != nil || v.(*protocol.TextEvent).Text != "a" {
		t.Fatalf("added field: %v %v", v, err)
	}
}

func TestDecodeRequest(t *testing.T) {
	r, err := protocol.DecodeRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil || r.Messages[0].Content.Text() != "hi" || r.Messages[0].Content[0].Type != "text" {
		t.Fatalf("string content: %+v %v", r, err)
	}
	r, err = protocol.DecodeRequest([]byte(`{"model":"m","system":"s","max_tokens":9,"messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":[{"type":"tool_call","id":"c","name":"read","input":{"path":"f"}}]},` +
		`{"role":"tool","content":[{"type":"tool_result","id":"c","output":"ok","is_error":true}]},{"role":"user","content":null}]}`))
	if err != nil || r.Model != "m" || r.System != "s" || r.MaxTokens != 9 || len(r.Messages) != 4 ||
		string(r.Messages[1].Content[0].Input) != `{"path":"f"}` || r.Messages[2].Content[0].Output != "ok" || !r.Messages[2].Content[0].IsError ||
		r.Messages[3].Content != nil {
		t.Fatalf("blocks: %+v %v", r, err)
	}
	cases := map[string]string{
		`{"messages":[]}`: "field messages: at least one message is required",
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":"lots"}`:                                                           "field max_tokens: expected int, got string",
		`{"messages":[{"role":"user","content":"x"}],"temprature":0.5}`:                                                              "field temprature: unknown field",
		`{"messages":[{"role":"bot","content":"x"}]}`:                                                                                `field messages[0].role: unknown role "bot"`,
		`{"messages":[{"role":"user","content":[{"type":"tool_call","name":"x"}]}]}`:                                                 "field messages[0].content[0].id: is required for a tool_call",
		`{"messages":[{"role":"user","content":[{"type":"image"}]}]}`:                                                                `field messages[0].content[0].type: unknown block type "image"`,
		`{"messages":[{"role":"user","content":"x"}]} {}`:                                                                            "unexpected data after the request",
		`{"messages":[{"role":"user","content":"x"}],"thinking":{"budget_tokens":-1}}`:                                               "field thinking.budget_tokens: must not be negative",
		`{"messages":[{"role":"user","content":"x"}],"tools":[{"description":"no name"}]}`:                                           "field tools[0].name: is required",
		`{"messages":[{"role":"user","content":[{"type":"tool_result"}]}],"max_tokens":1}`:                                           "field messages[0].content[0].id: is required for a tool_result",
		`{"messages":[{"role":"user","content":"x"}],"temperature":-1}`:                                                              "field temperature: must not be negative",
		`{"messages":[{"role":"user","content":5}]}`:                                                                                 "field messages[0].content: expected a string or an array of blocks",
		`{"messages":[{"role":"user","content":"x"},{"role":"tool","content":[{"type":"tool_result","id":"c1","content":"lost"}]}]}`: "field messages[1].content[0].content: unknown field",
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":7}]}]}`:                             "field messages[0].content[1].text: expected string, got number",
		`{"messages":[{"role":"user","content":["x"]}]}`:                                                                             "field messages[0].content[0]: expected a block object",
		`{"messages":[{"role":"user","content":"x","name":"me"}]}`:                                                                   "field name: unknown field",
		`not json`: "invalid JSON",
	}
	for in, want := range cases {
		_, err := protocol.DecodeRequest([]byte(in))
		var fe protocol.FieldError
		if !errors.As(err, &fe) || !fe.BadInput() || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", in, err, want)
		}
	}
}

func TestContentHelpers(t *testing.T) {
	c := protocol.Content{{Type: "text", Text: "a"}, {Type: "tool_call", ID: "1", Name: "x"}, {Type: "text", Text: "b"}}
	if c.Text() != "ab" || len(c.ToolCalls()) != 1 || c.ToolCalls()[0].Name != "x" {
		t.Fatal(c.Text(), c.ToolCalls())
	}
	u := protocol.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, CostUSD: 1}.Add(protocol.Usage{InputTokens: 1, CostUSD: 0.5})
	if u.Tokens() != 11 || u.CostUSD != 1.5 {
		t.Fatal(u)
	}
}

func TestSchemaNames(t *testing.T) {
	names := strings.Join(protocol.SchemaNames(), " ")
	for _, want := range []string{"request", "model-event", "loop-event", "journal-event", "task", "worker", "tool-list", "tool-result"} {
		if !strings.Contains(names, want) {
			t.Errorf("schema %s missing from %s", want, names)
		}
	}
	if _, err := protocol.Schema("nope"); err == nil {
		t.Error("unknown schema returned")
	}
}

func FuzzDecodeRecords(f *testing.F) {
	for _, s := range samples {
		b, _ := json.Marshal(s.v)
		f.Add(b)
	}
	f.Add([]byte(`{"type":5}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, fam := range []*protocol.Family{protocol.ModelEvents, protocol.LoopEvents, protocol.JournalEvents, protocol.ToolOutputs} {
			v, err := fam.Decode(data)
			if err != nil {
				continue
			}
			// What decodes re-encodes to a record of the same type.
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			t1, _ := protocol.TypeOf(data)
			t2, _ := protocol.TypeOf(b)
			if t1 != t2 {
				t.Fatalf("type changed: %q -> %q", t1, t2)
			}
		}
	})
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_call","id":"1","name":"x","input":{}}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := protocol.DecodeRequest(data)
		if err != nil {
			var fe protocol.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error is not a FieldError: %T %v", err, err)
			}
			return
		}
		// A valid request survives a round trip.
		b, _ := json.Marshal(r)
		if _, err := protocol.DecodeRequest(b); err != nil {
			t.Fatalf("round trip of a valid request failed: %v\n%s", err, b)
		}
	})
}
