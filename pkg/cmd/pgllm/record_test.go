package pgllm

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/cli"
)

// TestRecordHoldsNoKey: pg-llm --record against a server that sends back
// the key it was given (split across two text deltas, and in response
// headers), for a request that quotes the key: the recording holds
// neither the key nor any authorization header, and the call replays.
func TestRecordHoldsNoKey(t *testing.T) {
	const key = "test-key-value-0123456789-not-a-known-shape"
	var gotKey string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey = r.Header.Get("X-Api-Key")
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Authorization", "Bearer "+gotKey)
		w.Header().Set("X-Api-Key", gotKey)
		half := len(gotKey) / 2
		ev := func(typ, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data) }
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}`)
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		for _, part := range []string{"your key is " + gotKey[:half], gotKey[half:] + " and your header Authorization: Bearer " + gotKey} {
			ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, part))
		}
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`)
		ev("message_stop", `{"type":"message_stop"}`)
	}))
	defer srv.Close()
	home := t.TempDir()
	rec := filepath.Join(home, "rec.jsonl")
	var out, errb bytes.Buffer
	io := cli.Test(strings.NewReader("what is my key "+key+"?"), &out, &errb, "HOME="+home, "XDG_CONFIG_HOME="+home,
		"ANTHROPIC_API_KEY="+key, "ANTHROPIC_BASE_URL="+srv.URL)
	if code := cli.Run(context.Background(), Spec(), []string{"--model", "anthropic/claude-sonnet-4-5", "--record", rec}, io); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if gotKey != key {
		t.Fatalf("the server got key %q", gotKey)
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{key, key[:len(key)/2], key[len(key)/2:], `"authorization"`, `"Authorization"`, `"x-api-key"`, `"X-Api-Key"`, "Bearer " + key[:8]} {
		if bytes.Contains(b, []byte(bad)) {
			t.Errorf("the recording holds %q:\n%s", bad, b)
		}
	}
	if !bytes.Contains(b, []byte("your key is [redacted:ANTHROPIC_API_KEY] and your header Authorization: Bearer [redacted:ANTHROPIC_API_KEY]")) {
		t.Errorf("the recording lacks the redacted answer:\n%s", b)
	}
	// The recording still replays: the request was recorded as redacted,
	// and so is the request replayed here.
	out.Reset()
	io = cli.Test(strings.NewReader("what is my key [redacted:ANTHROPIC_API_KEY]?"), &out, &errb, "HOME="+home, "XDG_CONFIG_HOME="+home)
	if code := cli.Run(context.Background(), Spec(), []string{"--replay", rec, "--text"}, io); code != 0 {
		t.Fatalf("replay: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "your key is [redacted:ANTHROPIC_API_KEY]") {
		t.Fatalf("replay: %s", out.String())
	}
}
