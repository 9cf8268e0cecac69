package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/powerglide/powerglide/pkg/cmd/pgllm"
	"github.com/powerglide/powerglide/pkg/llm/llmtest"
	"github.com/rogpeppe/go-internal/testscript"
)

func init() { tools["pg-llm"] = pgllm.Spec }

func TestPgLLM(t *testing.T) {
	t.Parallel()
	p := Params(scriptDir("pg-llm"))
	p.Cmds["fakellm"] = cmdFakeLLM
	p.Cmds["fakellm-requests"] = cmdFakeLLMRequests
	p.Cmds["fakellm-conns"] = cmdFakeLLMConns
	p.Cmds["endlessllm"] = cmdEndlessLLM
	runTestscript(t, p)
}

var (
	fakeMu      sync.Mutex
	fakeServers = map[string]*llmtest.Server{} // by script work dir + variable
)

// cmdEndlessLLM starts a local server whose every answer streams forever
// in the given shape (llmtest.EndlessShapes) and sets VAR to its URL; the
// script ends it:
//
//	endlessllm VAR SHAPE
func cmdEndlessLLM(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: endlessllm VAR SHAPE")
	}
	srv, err := llmtest.NewEndless(args[1])
	ts.Check(err)
	ts.Defer(srv.Close)
	ts.Setenv(args[0], srv.URL)
}

// cmdFakeLLM starts a local server that answers successive requests with
// recorded responses (testdata/llm/<family>/<name>.http, or a file of the
// script) and sets VAR to its URL:
//
//	fakellm [-repeat] [-provider NAME] VAR FIXTURE...
//
// -repeat answers every later request with the last fixture; -provider
// names an openai-compatible provider NAME at the server in the config file.
func cmdFakeLLM(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("fakellm cannot be negated")
	}
	repeat, provider := false, ""
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-repeat":
			repeat = true
			args = args[1:]
		case "-provider":
			if len(args) < 2 {
				ts.Fatalf("usage: fakellm [-repeat] [-provider NAME] VAR FIXTURE...")
			}
			provider, args = args[1], args[2:]
		default:
			ts.Fatalf("fakellm: unknown option %s", args[0])
		}
	}
	if len(args) < 2 {
		ts.Fatalf("usage: fakellm [-repeat] [-provider NAME] VAR FIXTURE...")
	}
	var paths []string
	for _, f := range args[1:] {
		p := ts.MkAbs(f)
		if _, err := os.Stat(p); err != nil {
			p = filepath.Join("..", "..", "testdata", "llm", f)
		}
		abs, _ := filepath.Abs(p)
		paths = append(paths, abs)
	}
	rs, err := llmtest.Load(paths...)
	ts.Check(err)
	srv := llmtest.NewServer(rs...)
	srv.SetRepeat(repeat)
	ts.Defer(srv.Close)
	ts.Setenv(args[0], srv.URL)
	fakeMu.Lock()
	fakeServers[ts.Getenv("WORK")+"/"+args[0]] = srv
	fakeMu.Unlock()
	if provider != "" {
		file := filepath.Join(ts.Getenv("XDG_CONFIG_HOME"), "powerglide", "config.json")
		cfg := map[string]any{}
		if b, err := os.ReadFile(file); err == nil {
			ts.Check(json.Unmarshal(b, &cfg))
		}
		provs, _ := cfg["providers"].(map[string]any)
		if provs == nil {
			provs = map[string]any{}
		}
		provs[provider] = map[string]string{"kind": "openai-compatible", "base_url": srv.URL + "/v1"}
		cfg["providers"] = provs
		b, _ := json.MarshalIndent(cfg, "", "  ")
		ts.Check(os.MkdirAll(filepath.Dir(file), 0o755))
		ts.Check(os.WriteFile(file, b, 0o644))
	}
}

// cmdFakeLLMRequests prints what the server of VAR received: one line
// "N METHOD PATH" and the body per request.
func cmdFakeLLMRequests(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: fakellm-requests VAR")
	}
	fakeMu.Lock()
	srv := fakeServers[ts.Getenv("WORK")+"/"+args[0]]
	fakeMu.Unlock()
	if srv == nil {
		ts.Fatalf("no fakellm server for %s", args[0])
	}
	for i, r := range srv.Requests() {
		fmt.Fprintf(ts.Stdout(), "%d %s %s\n%s\n", i+1, r.Method, r.Path, r.Body)
	}
}

// cmdFakeLLMConns prints how many TCP connections the server of VAR
// accepted.
func cmdFakeLLMConns(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: fakellm-conns VAR")
	}
	fakeMu.Lock()
	srv := fakeServers[ts.Getenv("WORK")+"/"+args[0]]
	fakeMu.Unlock()
	if srv == nil {
		ts.Fatalf("no fakellm server for %s", args[0])
	}
	fmt.Fprintf(ts.Stdout(), "%d\n", srv.Conns())
}
