package llmtest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/llm"
	"github.com/powerglide/powerglide/pkg/llm/llmtest"
	"github.com/powerglide/powerglide/pkg/protocol"
)

const script = `{"tasks":[
 {"match":"fix mathx","turns":[
   {"text":"Let me look.","calls":[{"name":"read","input":{"path":"mathx/mathx.go"}},{"name":"read","input":{"path":"mathx/mathx_test.go"}}]},
   {"text":"Clamp fixed: values above the range return hi — déjà vu"}]},
 {"match":"other","turns":[{"text":"nothing"}]}]}`

// The scripted model speaks the real Anthropic wire format: pg-llm's own
// Anthropic provider assembles its turns, tool calls included.
func TestScriptedThroughAnthropicProvider(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(path, []byte(script), 0o644)
	s, err := llmtest.LoadScript(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	router, err := llm.NewRouter(llm.Options{AnthropicKey: "k", AnthropicBaseURL: srv.URL, Retries: 0})
	if err != nil {
		t.Fatal(err)
	}
	user := protocol.Message{Role: "user", Content: protocol.Content{{Type: "text", Text: "Please fix mathx.Clamp"}}}
	req := &protocol.Request{Model: "anthropic/claude-sonnet-4-5", MaxTokens: 100, Messages: []protocol.Message{user}}
	end, err := router.Call(context.Background(), req, func(any) {})
	if err != nil {
		t.Fatal(err)
	}
	if end.StopReason != "tool_use" || len(end.Message.Content) != 3 {
		t.Fatalf("turn 1: %+v", end)
	}
	c := end.Message.Content[2]
	if c.Type != "tool_call" || c.Name != "read" || c.ID != "toolu_fixmathx_1_2" || string(c.Input) != `{"path":"mathx/mathx_test.go"}` {
		t.Fatalf("second call: %+v", c)
	}
	if end.Usage.InputTokens == 0 || end.Usage.OutputTokens == 0 {
		t.Fatalf("usage: %+v", end.Usage)
	}

	req.Messages = append(req.Messages, end.Message, protocol.Message{Role: "user", Content: protocol.Content{
		{Type: "tool_result", ID: "toolu_fixmathx_1_1", Output: "x"}, {Type: "tool_result", ID: "toolu_fixmathx_1_2", Output: "y"}}})
	end, err = router.Call(context.Background(), req, func(any) {})
	if err != nil {
		t.Fatal(err)
	}
	if end.StopReason != "end_turn" || end.Message.Content[0].Text != "Clamp fixed: values above the range return hi — déjà vu" {
		t.Fatalf("turn 2: %+v", end)
	}

	// Past the last turn, and a request no task matches: clear 400s.
	req.Messages = append(req.Messages, end.Message, user)
	if _, err := router.Call(context.Background(), req, func(any) {}); err == nil || !strings.Contains(err.Error(), "has 2 turns") {
		t.Fatalf("past the script: %v", err)
	}
	req.Messages = []protocol.Message{{Role: "user", Content: protocol.Content{{Type: "text", Text: "unknown"}}}}
	if _, err := router.Call(context.Background(), req, func(any) {}); err == nil || !strings.Contains(err.Error(), "no task matching") {
		t.Fatalf("no match: %v", err)
	}
}

func TestLoadScriptRejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"unknown field": `{"tasks":[{"match":"a","turns":[{"text":"x"}],"extra":1}]}`,
		"no turns":      `{"tasks":[{"match":"a","turns":[]}]}`,
		"bad input":     `{"tasks":[{"match":"a","turns":[{"calls":[{"name":"read","input":"x"}]}]}]}`,
	} {
		p := filepath.Join(dir, "s.json")
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := llmtest.LoadScript(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	var s llmtest.Script
	if err := json.Unmarshal([]byte(script), &s); err != nil || len(s.Tasks) != 2 {
		t.Fatal(err)
	}
}

// The scripted model refuses what the Messages API refuses: a resumed
// agent that sends an orphan tool_use, a stray tool_result, two turns of
// one role in a row or a prefill gets the API's 400, not an answer.
func TestScriptedRefusesInvalidTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(path, []byte(script), 0o644)
	s, err := llmtest.LoadScript(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	const (
		task   = `{"role":"user","content":[{"type":"text","text":"fix mathx"}]}`
		use    = `{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"t1","name":"read","input":{}}]}`
		result = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}`
		answer = `{"role":"assistant","content":[{"type":"text","text":"done"}]}`
	)
	for name, c := range map[string]struct{ msgs, want string }{
		"valid":             {task + "," + use + "," + result, ""},
		"orphan tool_use":   {task + "," + use, "tool_use ids were found without tool_result blocks immediately after: t1"},
		"unanswered":        {task + "," + use + "," + task, "messages.1: tool_use ids were found without tool_result blocks"},
		"stray tool_result": {task + "," + answer + "," + result, "unexpected tool_use_id found in tool_result blocks: t1"},
		"assistant first":   {answer + "," + task, "roles must alternate, starting with user"},
		"two user turns":    {task + "," + task, "roles must alternate"},
		"prefill":           {task + "," + answer, "ends with an assistant turn"},
	} {
		body := `{"model":"m","max_tokens":10,"stream":true,"messages":[` + c.msgs + `]}`
		resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if c.want == "" {
			if resp.StatusCode != 200 {
				t.Errorf("%s: %d %s", name, resp.StatusCode, b)
			}
			continue
		}
		if resp.StatusCode != 400 || !strings.Contains(string(b), "invalid_request_error") || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: got %d %s, want a 400 saying %q", name, resp.StatusCode, b, c.want)
		}
	}
}
