package loop

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/shell"
)

// listingTools is a tool component whose List tells when it was asked.
type listingTools struct {
	*funcTools
	listed chan struct{}
}

func (t *listingTools) List(ctx context.Context) ([]protocol.ToolDef, error) {
	close(t.listed)
	return t.funcTools.List(ctx)
}

// TestModelLookupWhileToolsList: the model table is read while the run
// starts, at the same time as the tools are listed (the table waits here
// for the list to be asked for: a lookup made before the list, as pg-loop
// ran pg-llm models before its coprocesses, never sees it), and the
// model's window and prices count from the first request on.
func TestModelLookupWhileToolsList(t *testing.T) {
	tools := &listingTools{funcTools: okTool("ok"), listed: make(chan struct{})}
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}
	h := newHarness(t, llm, tools, "t")
	h.opts.ContextWindow = 200000
	h.opts.Budget.USD = 0.0001 // less than the first call can cost at the model's prices
	h.opts.Lookup = &ModelLookup{ID: "fake/small", Window: true, Table: func(ctx context.Context) ([]ModelInfo, error) {
		select {
		case <-tools.listed:
		case <-time.After(5 * time.Second):
			return nil, errors.New("the tools were not listed while the model table was read")
		}
		return []ModelInfo{{ID: "fake/big", ContextWindow: 1000000}, {ID: "fake/small", ContextWindow: 6000, InputPerMTok: 1, OutputPerMTok: 5}}, nil
	}}
	var errb strings.Builder
	h.opts.Stderr = &errb
	res := h.run(t)
	out := h.out.String()
	if !strings.Contains(out, "model fake/small: context window 6000 tokens, $1 in, $5 out per million tokens") {
		t.Fatalf("the model was not found: %s\n%s", errb.String(), out)
	}
	if !res.Limit || len(llm.reqs) != 0 {
		t.Fatalf("the first call was not priced at the model's prices: %+v, %d requests\n%s", res, len(llm.reqs), out)
	}
}

// TestModelLookupFails: a table that cannot be read is a warning; the run
// goes on with the configured window.
func TestModelLookupFails(t *testing.T) {
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}
	h := newHarness(t, llm, okTool("ok"), "t")
	h.opts.ContextWindow = 200000
	h.opts.Lookup = &ModelLookup{ID: "fake/small", Window: true, Table: func(context.Context) ([]ModelInfo, error) {
		return nil, errors.New("model table: no pg-llm")
	}}
	var errb strings.Builder
	h.opts.Stderr = &errb
	if res := h.run(t); res.State != Done {
		t.Fatalf("%+v\n%s", res, h.out.String())
	}
	if errb.String() != "pg-loop: warning: model table: no pg-llm\n" {
		t.Fatalf("stderr %q", errb.String())
	}
}

// TestModelLookupWindowTooSmall: a model whose window leaves no room once
// max_tokens is kept free fails the run before any request, as a
// configured window that small does.
func TestModelLookupWindowTooSmall(t *testing.T) {
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}
	h := newHarness(t, llm, okTool("ok"), "t")
	h.opts.ContextWindow = 200000
	h.opts.Lookup = &ModelLookup{ID: "fake/tiny", Window: true, Table: func(context.Context) ([]ModelInfo, error) {
		return []ModelInfo{{ID: "fake/tiny", ContextWindow: 1200}}, nil
	}}
	res := h.run(t)
	if res.State != Failed || len(llm.reqs) != 0 || !strings.Contains(h.out.String(), "a context window of 1200 tokens leaves no room") {
		t.Fatalf("%+v, %d requests\n%s", res, len(llm.reqs), h.out.String())
	}
}

// TestSummaryResources: the summary reports what pg-loop and each
// coprocess used, the coprocesses ended before it so that the kernel
// counts all of theirs.
func TestSummaryResources(t *testing.T) {
	llm := NewServeLLM(fakeCmd(t, "llm 3"), os.Stderr)
	tools := NewServeTools(fakeCmd(t, "tools"), "", "", nil, os.Stderr)
	tools.Inband = true
	defer llm.Close()
	defer tools.Close()
	h := newHarness(t, llm, tools, "one")
	if res := h.run(t); res.State != Done {
		t.Fatalf("%+v\n%s", res, h.out.String())
	}
	var sum protocol.LoopSummaryEvent
	for _, l := range strings.Split(h.out.String(), "\n") {
		if strings.HasPrefix(l, `{"type":"summary"`) {
			if err := json.Unmarshal([]byte(l), &sum); err != nil {
				t.Fatal(err)
			}
		}
	}
	var got []string
	for _, u := range sum.Resources {
		got = append(got, u.Component)
		if u.Processes != 1 || u.MaxRSSKB < 1000 || u.UserMS+u.SysMS <= 0 {
			t.Errorf("%s: %+v", u.Component, u)
		}
	}
	if strings.Join(got, ",") != "loop,model,tools" {
		t.Fatalf("resources of %v, want loop, model, tools: %+v", got, sum)
	}
}

// TestCoprocessGoneSaysHow: a request to a coprocess that is exiting (its
// stdin already closed) reports how it ended, not the broken pipe.
func TestCoprocessGoneSaysHow(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "closed")
	llm := NewServeLLM("exec 0<&-; touch "+shell.Quote(mark)+"; sleep 0.3; exit 3", os.Stderr)
	defer llm.Close()
	llm.Start()
	for i := 0; ; i++ {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		if i == 500 {
			t.Fatal("the coprocess did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err := llm.Call(context.Background(), &protocol.Request{Messages: []protocol.Message{{Role: "user", Content: protocol.Content{{Type: "text", Text: "hi"}}}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "stopped: exit status 3") {
		t.Fatalf("error %v, want the coprocess's exit", err)
	}
}

// TestModelTableUnanswered: a model component that ignores a
// model-list-request (a serve component of one's own put in pg-llm's
// place) leaves the model unknown after modelTableWait, with a warning:
// the run does not wait for it for ever.
func TestModelTableUnanswered(t *testing.T) {
	defer func(d time.Duration) { modelTableWait = d }(modelTableWait)
	modelTableWait = 200 * time.Millisecond
	llm := NewServeLLM("cat >/dev/null", os.Stderr)
	defer llm.Close()
	done := make(chan error, 1)
	go func() {
		_, err := llm.Models(context.Background())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "did not answer") {
			t.Fatalf("error %v, want one saying the component did not answer", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Models still waits for a component that ignores the request")
	}
}
