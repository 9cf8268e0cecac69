package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/powerglide/powerglide/pkg/cmd/pgloop"
	"github.com/powerglide/powerglide/pkg/llm/llmtest"
	"github.com/rogpeppe/go-internal/testscript"
)

func init() { tools["pg-loop"] = pgloop.Spec }

// TestPgLoop runs testdata/script/pg-loop with the shell-script stand-ins
// for pg-llm, pg-tool and pg-queue (testdata/loop-doubles: fake-llm,
// fake-tool, fake-queue) on PATH.
func TestPgLoop(t *testing.T) {
	t.Parallel()
	p := withLoopDoubles(t, Params(scriptDir("pg-loop")))
	p.Cmds["fakellm"] = cmdFakeLLM
	p.Cmds["fakellm-requests"] = cmdFakeLLMRequests
	p.Cmds["scriptllm"] = cmdScriptLLM
	p.Cmds["scriptllm-requests"] = cmdScriptLLMRequests
	runTestscript(t, p)
}

// withLoopDoubles puts pg-loop's stand-ins for its components
// (testdata/loop-doubles: fake-llm, fake-tool, fake-queue) first on the
// scripts' PATH, so a script can run real pg-loop workers without a model.
func withLoopDoubles(t *testing.T, p testscript.Params) testscript.Params {
	t.Helper()
	doubles, err := filepath.Abs(filepath.Join("..", "..", "testdata", "loop-doubles"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(doubles); err != nil {
		t.Fatal(err)
	}
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if setup != nil {
			if err := setup(env); err != nil {
				return err
			}
		}
		env.Setenv("PATH", doubles+string(os.PathListSeparator)+env.Getenv("PATH"))
		return nil
	}
	return p
}

// scriptServer is a scripted model (llmtest.Script) on a local port that
// keeps what it was asked and answered.
type scriptServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []string // "STATUS MESSAGES" per request
}

var (
	scriptMu      sync.Mutex
	scriptServers = map[string]*scriptServer{} // by script work dir + variable
)

// cmdScriptLLM starts a scripted model on a local port: it answers each
// task of SCRIPT.json turn by turn, and refuses with the Messages API's 400
// a request whose turns the API would refuse (an orphan tool_use, a
// prefill, ...). VAR is set to its URL (for ANTHROPIC_BASE_URL):
//
//	scriptllm VAR SCRIPT.json
func cmdScriptLLM(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: scriptllm VAR SCRIPT.json")
	}
	script, err := llmtest.LoadScript(ts.MkAbs(args[1]))
	ts.Check(err)
	s := &scriptServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		script.ServeHTTP(rec, r)
		var req struct {
			Messages json.RawMessage `json:"messages"`
		}
		json.Unmarshal(body, &req)
		s.mu.Lock()
		s.reqs = append(s.reqs, fmt.Sprintf("%d %s", rec.Code, req.Messages))
		s.mu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	ts.Defer(s.Close)
	ts.Setenv(args[0], s.URL)
	scriptMu.Lock()
	scriptServers[ts.Getenv("WORK")+"/"+args[0]] = s
	scriptMu.Unlock()
}

// cmdScriptLLMRequests prints what the scripted model of VAR was asked:
// one line per request, "N STATUS MESSAGES" (its answer's status and the
// request's messages as JSON).
//
//	scriptllm-requests VAR
func cmdScriptLLMRequests(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: scriptllm-requests VAR")
	}
	scriptMu.Lock()
	s := scriptServers[ts.Getenv("WORK")+"/"+args[0]]
	scriptMu.Unlock()
	if s == nil {
		ts.Fatalf("no scriptllm server for %s", args[0])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.reqs {
		fmt.Fprintf(ts.Stdout(), "%d %s\n", i+1, r)
	}
}
