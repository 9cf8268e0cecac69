package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/loop/internal/fake"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/protocol/validate"
	"github.com/powerglide/powerglide/pkg/shell"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// TestMain lets the test binary stand in for pg-llm serve and pg-tool
// serve (PGLOOP_FAKE=1 test-binary llm N | tools | list), for a process
// that holds a session (PGLOOP_HOLD_SESSION=DIR) and for one that fills a
// session's memory past its file size limit (PGLOOP_FILL_SESSION=DIR).
func TestMain(m *testing.M) {
	if os.Getenv("PGLOOP_FAKE") == "1" {
		if err := fake.Main(os.Args[1:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if dir := os.Getenv("PGLOOP_FILL_SESSION"); dir != "" {
		fillSession(dir)
	}
	if dir := os.Getenv("PGLOOP_HOLD_SESSION"); dir != "" {
		// A driver of session dir (TestSessionLock): it takes the lock,
		// says so, and waits to be killed.
		s := &Session{Dir: dir}
		if err := s.Lock(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("locked")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func fakeCmd(t testing.TB, args string) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return "PGLOOP_FAKE=1 " + shell.Quote(exe) + " " + args
}

// scriptLLM is an in-process model: each call takes the next answer.
type scriptLLM struct {
	mu      sync.Mutex
	answers []func(req *protocol.Request) (*protocol.EndEvent, error)
	reqs    []*protocol.Request
}

func (s *scriptLLM) Call(ctx context.Context, req *protocol.Request, _ func(any)) (*protocol.EndEvent, error) {
	s.mu.Lock()
	cp := *req
	cp.Messages = append([]protocol.Message(nil), req.Messages...)
	s.reqs = append(s.reqs, &cp)
	i := len(s.reqs) - 1
	if i >= len(s.answers) {
		i = len(s.answers) - 1
	}
	f := s.answers[i]
	s.mu.Unlock()
	return f(req)
}

func (s *scriptLLM) Close() error { return nil }

func say(text string) func(*protocol.Request) (*protocol.EndEvent, error) {
	return func(*protocol.Request) (*protocol.EndEvent, error) {
		return &protocol.EndEvent{Type: "end", StopReason: "end_turn", Message: protocol.Message{Role: "assistant", Content: protocol.Content{{Type: "text", Text: text}}},
			Usage: protocol.Usage{InputTokens: 10, OutputTokens: 10, CostUSD: 0.001}}, nil
	}
}

func call(name, input string) func(*protocol.Request) (*protocol.EndEvent, error) {
	return func(req *protocol.Request) (*protocol.EndEvent, error) {
		id := fmt.Sprintf("c%d", len(req.Messages))
		return &protocol.EndEvent{Type: "end", StopReason: "tool_use", Message: protocol.Message{Role: "assistant", Content: protocol.Content{{Type: "tool_call", ID: id, Name: name, Input: json.RawMessage(input)}}},
			Usage: protocol.Usage{InputTokens: 10, OutputTokens: 10, CostUSD: 0.001}}, nil
	}
}

// funcTools is an in-process tool component.
type funcTools struct {
	f func(c protocol.ToolCall) protocol.ToolResult
}

func (t *funcTools) List(context.Context) ([]protocol.ToolDef, error) { return fake.ToolDefs, nil }
func (t *funcTools) Call(ctx context.Context, calls []protocol.ToolCall) ([]protocol.ToolResult, error) {
	out := make([]protocol.ToolResult, len(calls))
	for i, c := range calls {
		out[i] = t.f(c)
	}
	return out, nil
}
func (t *funcTools) Close() error { return nil }

func okTool(output string) *funcTools {
	return &funcTools{f: func(c protocol.ToolCall) protocol.ToolResult {
		return protocol.ToolResult{Type: "result", ID: c.ID, Name: c.Name, OK: true, Output: output}
	}}
}

type harness struct {
	out  bytes.Buffer
	opts Options
	sess *Session
	home string
}

func newHarness(t *testing.T, llm LLM, tools Tools, tasks ...string) *harness {
	t.Helper()
	h := &harness{home: t.TempDir()}
	var ts []protocol.Task
	for i, p := range tasks {
		ts = append(ts, NewTask(TaskInput{ID: fmt.Sprintf("task-%d", i+1), Prompt: p}, time.Now()))
	}
	sess, err := CreateSession(h.home, t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	h.sess = sess
	h.opts = Options{Workdir: sess.Info.Workdir, LLM: llm, Tools: tools, Source: &ListSource{Tasks: ts}, Events: NewEmitter(&h.out, false),
		MaxTokens: 1000, MaxSteps: 50, BreakerSame: 3, BreakerFailures: 5, Session: sess}
	return h
}

func (h *harness) run(t *testing.T) Result {
	t.Helper()
	r, err := NewRunner(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	res := r.Run(context.Background())
	lines := strings.Split(strings.TrimSpace(h.out.String()), "\n")
	if err := validate.Lines("loop-event", []byte(strings.Join(lines[:len(lines)-1], "\n")+"\n")); err != nil {
		t.Fatalf("events do not validate: %v\n%s", err, h.out.String())
	}
	return res
}

func (h *harness) count(typ string) int { return strings.Count(h.out.String(), `"type":"`+typ+`"`) }

func TestRunWithCoprocesses(t *testing.T) {
	llm := NewServeLLM(fakeCmd(t, "llm 3"), os.Stderr)
	tools := NewServeTools(fakeCmd(t, "tools"), fakeCmd(t, "list"), "", nil, os.Stderr)
	defer llm.Close()
	defer tools.Close()
	h := newHarness(t, llm, tools, "one", "two")
	res := h.run(t)
	if res.State != Done || res.TasksDone != 2 || res.Failed != 0 {
		t.Fatalf("result %+v\n%s", res, h.out.String())
	}
	if n := h.count("tool_result"); n != 6 {
		t.Errorf("%d tool results, want 6", n)
	}
	if !strings.HasSuffix(h.out.String(), MarkerDone+"\n") {
		t.Errorf("last line is not the done marker")
	}
	rp, err := h.sess.LoadReplay()
	if err != nil {
		t.Fatal(err)
	}
	if rp.Current != nil || rp.Ended["task-1"] != "done" || rp.Ended["task-2"] != "done" || rp.TotalSteps != 8 {
		t.Errorf("replay %+v", rp)
	}
}

func TestParallelCallsKeepOrder(t *testing.T) {
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){
		func(*protocol.Request) (*protocol.EndEvent, error) {
			var blocks protocol.Content
			for i := 0; i < 5; i++ {
				blocks = append(blocks, protocol.Block{Type: "tool_call", ID: fmt.Sprintf("p%d", i), Name: "echo", Input: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
			}
			return &protocol.EndEvent{StopReason: "tool_use", Message: protocol.Message{Role: "assistant", Content: blocks}}, nil
		},
		say("done"),
	}}
	tools := NewServeTools(fakeCmd(t, "tools"), fakeCmd(t, "list"), "", nil, os.Stderr)
	defer tools.Close()
	h := newHarness(t, llm, tools, "p")
	if res := h.run(t); res.State != Done {
		t.Fatalf("%+v", res)
	}
	last := llm.reqs[1].Messages[2]
	if last.Role != "tool" || len(last.Content) != 5 {
		t.Fatalf("tool message %+v", last)
	}
	for i, b := range last.Content {
		if b.ID != fmt.Sprintf("p%d", i) || b.Output != fmt.Sprintf(`{"i":%d}`, i) {
			t.Errorf("result %d: %+v", i, b)
		}
	}
}

func TestCoprocessDiesAndRestarts(t *testing.T) {
	dir := t.TempDir()
	// Dies on the first request; answers properly once restarted.
	script := filepath.Join(dir, "m.sh")
	os.WriteFile(script, []byte(`if [ ! -e `+dir+`/started ]; then touch `+dir+`/started; read x; echo '{"id":"zz","type":"start","provider":"x","model":"y"}'; exit 3; fi
`+fakeCmd(t, "llm 0")+"\n"), 0o755)
	llm := NewServeLLM("sh "+script, os.Stderr)
	defer llm.Close()
	req := &protocol.Request{Messages: []protocol.Message{{Role: "user", Content: protocol.Content{{Type: "text", Text: "hi"}}}}}
	_, err := llm.Call(context.Background(), req, nil)
	if err == nil || !strings.Contains(err.Error(), "model coprocess") || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("want a stopped coprocess error, got %v", err)
	}
	end, err := llm.Call(context.Background(), req, nil)
	if err != nil || end.Message.Content.Text() != "done" {
		t.Fatalf("after restart: %v %+v", err, end)
	}
	// Concurrent calls are routed by id.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := llm.Call(context.Background(), req, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

func TestCommandComponents(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "t.sh")
	os.WriteFile(tool, []byte(`case $1 in list) echo '[{"name":"up","description":"d"}]';; call) [ "$2" = up ] || { echo "no tool $2" >&2; exit 5; }; echo "$3" | tr a-z A-Z;; esac
`), 0o755)
	tools := &CommandTools{Cmdline: "sh " + tool, Stderr: os.Stderr}
	defs, err := tools.List(context.Background())
	if err != nil || len(defs) != 1 || string(defs[0].InputSchema) != `{"type":"object"}` {
		t.Fatalf("list: %v %+v", err, defs)
	}
	res, err := tools.Call(context.Background(), []protocol.ToolCall{{ID: "a", Name: "up", Input: json.RawMessage(`{"x":"abc"}`)}, {ID: "b", Name: "down"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].OK || strings.TrimSpace(res[0].Output) != `{"X":"ABC"}` || res[0].ID != "a" {
		t.Errorf("call a: %+v", res[0])
	}
	if res[1].OK || res[1].Error == nil || !strings.Contains(*res[1].Error, "exit 5: no tool down") {
		t.Errorf("call b: %+v", res[1])
	}
	llm := &CommandLLM{Cmdline: "echo '{\"type\":\"error\",\"kind\":\"rate_limit\",\"message\":\"slow down\",\"retryable\":true}'"}
	_, err = llm.Call(context.Background(), &protocol.Request{}, nil)
	var me *ModelError
	if !errors.As(err, &me) || me.Event.Kind != "rate_limit" || me.Auth() {
		t.Errorf("want a rate_limit model error, got %v", err)
	}
	llm = &CommandLLM{Cmdline: "echo '{\"type\":\"start\",\"provider\":\"p\",\"model\":\"m\"}'"}
	if _, err = llm.Call(context.Background(), &protocol.Request{}, nil); !errors.Is(err, protocol.ErrNoEnd) {
		t.Errorf("want ErrNoEnd, got %v", err)
	}
	// A component reporting a usage no call has (which would evade the
	// budgets) is broken: the call fails, and it is no model error the
	// next task could survive.
	for _, usage := range []string{`{"input_tokens":-1000000,"output_tokens":5}`, `{"output_tokens":5,"cost_usd":-1499999.99997}`} {
		llm = &CommandLLM{Cmdline: `echo '{"type":"end","stop_reason":"end_turn","message":{"role":"assistant","content":"hi"},"usage":` + usage + `}'`}
		end, err := llm.Call(context.Background(), &protocol.Request{}, nil)
		if err == nil || end != nil || errors.As(err, &me) || !strings.Contains(err.Error(), "model component: end: usage:") {
			t.Errorf("usage %s: end %v, err %v; want the component refused", usage, end, err)
		}
	}
}

func TestLimitsAreIndependent(t *testing.T) {
	cases := []struct {
		name   string
		answer []func(*protocol.Request) (*protocol.EndEvent, error)
		tools  *funcTools
		set    func(o *Options)
		limit  string
		fatal  bool
	}{
		{"steps", []func(*protocol.Request) (*protocol.EndEvent, error){func(r *protocol.Request) (*protocol.EndEvent, error) {
			return call("echo", fmt.Sprintf(`{"n":%d}`, len(r.Messages)))(r)
		}}, okTool("x"), func(o *Options) { o.MaxSteps = 4; o.BreakerSame = 0 }, LimitSteps, false},
		{"same call", []func(*protocol.Request) (*protocol.EndEvent, error){call("echo", `{"a":1,"b":2}`), call("echo", `{"b":2, "a":1}`), call("echo", `{"a":1,"b":2}`)},
			okTool("x"), func(o *Options) {}, LimitBreaker, false},
		{"failing tool", []func(*protocol.Request) (*protocol.EndEvent, error){func(r *protocol.Request) (*protocol.EndEvent, error) {
			return call("echo", fmt.Sprintf(`{"n":%d}`, len(r.Messages)))(r)
		}}, &funcTools{f: func(c protocol.ToolCall) protocol.ToolResult {
			e := "boom"
			return protocol.ToolResult{Type: "result", ID: c.ID, Name: c.Name, Error: &e}
		}}, func(o *Options) { o.BreakerFailures = 2 }, LimitBreaker, false},
		{"tokens", []func(*protocol.Request) (*protocol.EndEvent, error){func(r *protocol.Request) (*protocol.EndEvent, error) {
			return call("echo", fmt.Sprintf(`{"n":%d}`, len(r.Messages)))(r)
		}}, okTool("x"), func(o *Options) { o.Budget.Tokens = 100 }, LimitBudgetTokens, true},
		{"usd", []func(*protocol.Request) (*protocol.EndEvent, error){func(r *protocol.Request) (*protocol.EndEvent, error) {
			return call("echo", fmt.Sprintf(`{"n":%d}`, len(r.Messages)))(r)
		}}, okTool("x"), func(o *Options) { o.Budget.USD = 0.0025; o.MaxTokens = 1 }, LimitBudgetUSD, true},
		{"verify", []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}, okTool("x"), func(o *Options) { o.Verify = "exit 1"; o.MaxVerify = 2 }, LimitVerify, false},
		{"iterations", []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}, okTool("x"), func(o *Options) { o.Promise = "OK"; o.MaxIterations = 3 }, LimitIterations, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, &scriptLLM{answers: c.answer}, c.tools, "t")
			c.set(&h.opts)
			res := h.run(t)
			if !res.Limit || !strings.Contains(h.out.String(), `"limit":"`+c.limit+`"`) {
				t.Fatalf("want limit %s, got %+v\n%s", c.limit, res, h.out.String())
			}
			if c.fatal != (res.State == Failed) {
				t.Errorf("state %s", res.State)
			}
			if !strings.Contains(h.out.String(), `"type":"task"`) || !strings.Contains(h.out.String(), `"status":"failed"`) {
				t.Errorf("task not failed")
			}
		})
	}
}

func TestVerifyFeedbackAndPromise(t *testing.T) {
	dir := t.TempDir()
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){
		say("done <promise>OK</promise>"),
		func(r *protocol.Request) (*protocol.EndEvent, error) {
			os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
			return say("fixed it <promise>OK</promise>")(r)
		},
	}}
	h := newHarness(t, llm, okTool("x"), "t")
	h.opts.Workdir = dir
	h.opts.Verify = "test -f f || { echo no f; exit 7; }"
	h.opts.Promise = "OK"
	if res := h.run(t); res.State != Done || res.TasksDone != 1 {
		t.Fatalf("%+v\n%s", res, h.out.String())
	}
	fb := llm.reqs[1].Messages[2].Content.Text()
	if !strings.Contains(fb, "promise was refused") || !strings.Contains(fb, "exit 7") || !strings.Contains(fb, "no f") {
		t.Errorf("feedback: %s", fb)
	}
}

// With an iteration cap the default verify cap yields: a Ralph loop whose
// check fails five times completes on its sixth iteration. A verify cap
// asked for still applies.
func TestIterationCapGovernsVerifyCap(t *testing.T) {
	check := "n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; test $n -gt 5"
	for _, c := range []struct {
		name  string
		set   bool
		limit string
	}{{"default verify cap", false, ""}, {"verify cap asked for", true, LimitVerify}} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done <promise>DONE</promise>")}}, okTool("x"), "t")
			h.opts.Fresh, h.opts.Promise, h.opts.MaxIterations = true, "DONE", 6
			h.opts.Verify, h.opts.MaxVerify, h.opts.MaxVerifySet = check, 3, c.set
			res := h.run(t)
			if c.limit == "" {
				if res.State != Done || res.TasksDone != 1 || res.Limit || h.count("verify") != 6 {
					t.Fatalf("want done after 6 verify runs, got %+v, %d runs\n%s", res, h.count("verify"), h.out.String())
				}
				return
			}
			if !res.Limit || !strings.Contains(h.out.String(), `"limit":"`+c.limit+`"`) || h.count("verify") != 3 {
				t.Fatalf("want the %s limit after 3 runs, got %+v, %d runs\n%s", c.limit, res, h.count("verify"), h.out.String())
			}
		})
	}
}

// An answer cut off at max_tokens is not final: the model is asked to go
// on, and the answer checked is the whole of it.
func TestMaxTokensAnswerContinues(t *testing.T) {
	dir := t.TempDir()
	cut := func(*protocol.Request) (*protocol.EndEvent, error) {
		end, _ := say("Creating f now, then I will say the w")(nil)
		end.StopReason = "max_tokens"
		return end, nil
	}
	rest := func(r *protocol.Request) (*protocol.EndEvent, error) {
		os.WriteFile(filepath.Join(dir, "f"), nil, 0o644)
		return say("ord. <promise>OK</promise>")(r)
	}
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){cut, rest}}
	h := newHarness(t, llm, okTool("x"), "t")
	h.opts.Workdir, h.opts.Verify, h.opts.Promise = dir, "test -f f", "OK"
	res := h.run(t)
	if res.State != Done || res.TasksDone != 1 || h.count("verify") != 1 {
		t.Fatalf("want done with one verify run, got %+v, %d runs\n%s", res, h.count("verify"), h.out.String())
	}
	if !strings.Contains(h.out.String(), `"from":"thinking","to":"thinking","reason":"max_tokens`) {
		t.Errorf("no truncated transition:\n%s", h.out.String())
	}
	msgs := llm.reqs[1].Messages
	if last := msgs[len(msgs)-1]; last.Role != protocol.RoleUser || !strings.Contains(last.Content.Text(), "cut off at the max_tokens limit") {
		t.Errorf("the second request does not ask to go on: %+v", last)
	}
	ls := h.opts.Source.(*ListSource)
	if !strings.Contains(string(ls.Tasks[0].Result), `"summary":"Creating f now, then I will say the word."`) {
		t.Errorf("result %s", ls.Tasks[0].Result)
	}
}

func TestWindowPrunesThenSummarizes(t *testing.T) {
	big := strings.Repeat("x", 4000)
	n := 0
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){func(r *protocol.Request) (*protocol.EndEvent, error) {
		if r.System == summarizeSystem {
			return say("SUMMARY: echoed a lot")(r)
		}
		n++
		if n > 40 {
			return say("done")(r)
		}
		return call("echo", fmt.Sprintf(`{"n":%d}`, n))(r)
	}}}
	h := newHarness(t, llm, okTool(big), "t")
	h.opts.ContextWindow = 4000
	h.opts.MaxTokens = 500
	h.opts.KeepMessages = 4
	if res := h.run(t); res.State != Done {
		t.Fatalf("%+v", res)
	}
	mem, _ := os.ReadFile(filepath.Join(h.sess.Dir, MemoryFile))
	if !bytes.Contains(mem, []byte(`"type":"prune"`)) || !bytes.Contains(mem, []byte(`"type":"summary"`)) {
		t.Fatalf("no prune or summary in memory:\n%s", h.out.String())
	}
	sawSummary := false
	for _, r := range llm.reqs {
		if r.System == summarizeSystem {
			sawSummary = true
			continue
		}
		if est := EstimateTokens(r); est > 4000 {
			t.Errorf("a request of %d tokens passed the window", est)
		}
		if strings.Contains(r.Messages[0].Content.Text(), "SUMMARY: echoed a lot") {
			if !strings.HasPrefix(r.Messages[0].Content.Text(), "t") {
				t.Errorf("the task was not kept first")
			}
		}
	}
	if !sawSummary {
		t.Fatal("no summarization call")
	}
	// Replaying memory rebuilds the conversation the last request saw.
	rp, err := h.sess.LoadReplay()
	if err != nil {
		t.Fatal(err)
	}
	if rp.Current != nil {
		t.Fatalf("task still current")
	}
}

func TestReplayMatchesLiveConversation(t *testing.T) {
	big := strings.Repeat("y", 3000)
	n := 0
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){func(r *protocol.Request) (*protocol.EndEvent, error) {
		if r.System == summarizeSystem {
			return say("S")(r)
		}
		n++
		return call("echo", fmt.Sprintf(`{"n":%d}`, n))(r)
	}}}
	h := newHarness(t, llm, okTool(big), "t")
	h.opts.ContextWindow = 3000
	h.opts.MaxTokens = 200
	h.opts.KeepMessages = 4
	h.opts.MaxSteps = 10
	h.run(t)
	// The step limit failed the task; cut memory before its end record and replay.
	b, _ := os.ReadFile(filepath.Join(h.sess.Dir, MemoryFile))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	body := strings.Join(lines[:len(lines)-1], "\n") + "\n" + `{"type":"message","ts":"2026-01-01T00:00:00Z","task":"task-1","mess` // torn line
	rp, err := ReadMemory(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	last := llm.reqs[len(llm.reqs)-1]
	// The live conversation is the last request plus the answer and its results.
	if rp.Current == nil || len(rp.Conv) != len(last.Messages)+2 {
		t.Fatalf("replayed %d messages, the last request had %d", len(rp.Conv), len(last.Messages))
	}
	a, _ := json.Marshal(rp.Conv[:len(last.Messages)])
	e, _ := json.Marshal(last.Messages)
	if !bytes.Equal(a, e) {
		t.Errorf("replayed conversation differs:\n%s\n%s", a, e)
	}
	if rp.Steps != 10 {
		t.Errorf("steps %d", rp.Steps)
	}
	// A usage edited negative would buy calls past a budget on resume.
	neg := `{"type":"message","task":"task-1","message":{"role":"assistant","content":[{"type":"text","text":"x"}]},"usage":{"input_tokens":5,"output_tokens":5,"cost_usd":-100}}`
	if _, err := ReadMemory(strings.NewReader(body + "\n" + neg + "\n")); err == nil || !strings.Contains(err.Error(), "usage: cost_usd is not a cost (-100)") {
		t.Errorf("negative usage in memory: %v", err)
	}
}

func TestVelocityFilePauses(t *testing.T) {
	vf := filepath.Join(t.TempDir(), "v")
	os.WriteFile(vf, []byte("0\n"), 0o644)
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}
	h := newHarness(t, llm, okTool("x"), "t")
	home := t.TempDir()
	d, _ := teamdir.New(home, "tm")
	d.Ensure()
	h.opts.Team, h.opts.Worker, h.opts.VelocityFile = fileTeam(d), "1", vf
	h.opts.Heartbeat = 20 * time.Millisecond
	done := make(chan Result)
	go func() {
		r, _ := NewRunner(h.opts)
		done <- r.Run(context.Background())
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		w, err := d.ReadWorker("1")
		if err == nil && w.Paused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never paused")
		}
		time.Sleep(10 * time.Millisecond)
	}
	llm.mu.Lock()
	calls := len(llm.reqs)
	llm.mu.Unlock()
	if calls != 0 {
		t.Fatal("the model was called while paused")
	}
	os.WriteFile(vf, []byte("1000"), 0o644)
	res := <-done
	if res.State != Done {
		t.Fatalf("%+v", res)
	}
	w, _ := d.ReadWorker("1")
	if w.Paused || w.Velocity != 1000 || w.State != "done" {
		t.Errorf("worker %+v", w)
	}
}

// A velocity change shows during a long delay: at 0.001 steps per second
// the delay is 1000 s, and a new velocity of 1000 ends it.
func TestVelocityChangeDuringDelay(t *testing.T) {
	vf := filepath.Join(t.TempDir(), "v")
	os.WriteFile(vf, []byte("0.001\n"), 0o644)
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}
	h := newHarness(t, llm, okTool("x"), "t")
	d, _ := teamdir.New(t.TempDir(), "tm")
	d.Ensure()
	h.opts.Team, h.opts.Worker, h.opts.VelocityFile = fileTeam(d), "1", vf
	done := make(chan Result, 1)
	go func() {
		r, _ := NewRunner(h.opts)
		done <- r.Run(context.Background())
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if w, err := d.ReadWorker("1"); err == nil && w.Velocity == 0.001 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the delay never started")
		}
	}
	os.WriteFile(vf, []byte("1000\n"), 0o644)
	select {
	case res := <-done:
		if res.State != Done {
			t.Fatalf("%+v", res)
		}
	case <-time.After(60 * time.Second): // far below the 1000 s delay
		t.Fatal("the new velocity was not seen during the delay")
	}
}

// waitSource has nothing claimable and is not drained until told.
type waitSource struct {
	ListSource
	drained atomic.Bool
	waits   atomic.Int32
}

func (s *waitSource) Drained(context.Context) (bool, string, error) {
	return s.drained.Load(), "1 claimed by other workers", nil
}

func (s *waitSource) WaitNext(ctx context.Context, _ time.Duration) (*protocol.Task, error) {
	s.waits.Add(1)
	return nil, sleep(ctx, 5*time.Millisecond)
}

// A team worker with nothing claimable waits while the queue is not
// drained, its progress refreshed by the heartbeat (a monitor must not
// take it for stuck), and ends with <POWERGLIDE_DONE> once it drained.
func TestWaitsUntilDrained(t *testing.T) {
	src := &waitSource{}
	h := newHarness(t, &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("x")}}, okTool("x"))
	h.opts.Source = src
	d, _ := teamdir.New(t.TempDir(), "tm")
	d.Ensure()
	h.opts.Team, h.opts.Worker, h.opts.Heartbeat = fileTeam(d), "1", 20*time.Millisecond
	done := make(chan Result, 1)
	go func() {
		r, _ := NewRunner(h.opts)
		done <- r.Run(context.Background())
	}()
	var first time.Time
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the progress time was not refreshed while waiting")
		}
		w, err := d.ReadWorker("1")
		if err != nil || src.waits.Load() == 0 || w.State != string(PickTask) {
			continue
		}
		if first.IsZero() {
			first = w.ProgressAt
		} else if w.ProgressAt.Sub(first) > 100*time.Millisecond {
			break
		}
	}
	select {
	case <-done:
		t.Fatal("the run ended while the queue was not drained")
	default:
	}
	src.drained.Store(true)
	res := <-done
	if res.State != Done || res.Idle || !strings.HasSuffix(strings.TrimSpace(h.out.String()), MarkerDone) {
		t.Fatalf("%+v\n%s", res, h.out.String())
	}
}

type leaseSource struct {
	ListSource
	failed, renewed int
	mu              sync.Mutex
}

func (s *leaseSource) Renew(context.Context, *protocol.Task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renewed++
	return fmt.Errorf("%w: stale token", ErrLeaseLost)
}

func (s *leaseSource) Fail(ctx context.Context, t *protocol.Task, r string, retry bool) error {
	s.mu.Lock()
	s.failed++
	s.mu.Unlock()
	return nil
}

func TestLeaseLostAbandonsTask(t *testing.T) {
	llm := &blockingLLM{}
	h := newHarness(t, llm, okTool("x"), "t")
	src := &leaseSource{ListSource: ListSource{Tasks: []protocol.Task{NewTask(TaskInput{ID: "q1", Prompt: "p"}, time.Now())}}}
	h.opts.Source = src
	d, _ := teamdir.New(t.TempDir(), "tm")
	d.Ensure()
	h.opts.Team, h.opts.Worker = fileTeam(d), "1"
	h.opts.Heartbeat, h.opts.Lease = 10*time.Millisecond, 30*time.Millisecond
	res := h.run(t)
	if res.State != Done || src.failed != 0 || src.renewed == 0 {
		t.Fatalf("res %+v failed %d renewed %d\n%s", res, src.failed, src.renewed, h.out.String())
	}
	if !strings.Contains(h.out.String(), "lease lost") {
		t.Errorf("no lease lost reason:\n%s", h.out.String())
	}
}

// A pipeline killed in a stage resumes its iteration count, also when its
// iterations ended without reaching the exit condition (no promise).
func TestPipelineKeepsIterationsEveryIteration(t *testing.T) {
	dir := t.TempDir()
	pf := filepath.Join(dir, "p.json")
	writeFile(t, pf, `{"stages":[{"name":"s","prompt":"work","exit":{"promise":"SHIP"},"max_iterations":5}]}`)
	p, err := ReadPipeline(pf)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state.json")
	ps, err := OpenPipeline(p, state, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("not yet"), say("still not"), func(*protocol.Request) (*protocol.EndEvent, error) {
		cancel() // killed during the third iteration
		return nil, context.Canceled
	}}}
	h := newHarness(t, llm, okTool("x"))
	h.opts.Source = ps
	r, _ := NewRunner(h.opts)
	if res := r.Run(ctx); !res.Signal {
		t.Fatalf("%+v\n%s", res, h.out.String())
	}
	ps2, err := OpenPipeline(p, state, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	task, _ := ps2.Next(context.Background())
	if n := ps2.Iterations(task); n != 2 {
		t.Fatalf("resumed with %d iterations, want 2", n)
	}
}

// blockingLLM waits for its context.
type blockingLLM struct{}

func (blockingLLM) Call(ctx context.Context, _ *protocol.Request, _ func(any)) (*protocol.EndEvent, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (blockingLLM) Close() error { return nil }

func TestSignalReleases(t *testing.T) {
	h := newHarness(t, blockingLLM{}, okTool("x"), "t")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	r, _ := NewRunner(h.opts)
	res := r.Run(ctx)
	if !res.Signal || res.State != Failed {
		t.Fatalf("%+v", res)
	}
	if strings.Contains(h.out.String(), "<POWERGLIDE_") {
		t.Errorf("a marker after a signal")
	}
	ls := h.opts.Source.(*ListSource)
	if ls.Tasks[0].Status != protocol.StatusPending {
		t.Errorf("task %s, want released to pending", ls.Tasks[0].Status)
	}
	b, _ := os.ReadFile(filepath.Join(h.sess.Dir, SessionFile))
	if !bytes.Contains(b, []byte(`"status": "interrupted"`)) {
		t.Errorf("session: %s", b)
	}
}

// A context_overflow from the model compacts the conversation and retries
// once, even with the window estimate off.
func TestContextOverflowCompacts(t *testing.T) {
	n := 0
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){func(r *protocol.Request) (*protocol.EndEvent, error) {
		if r.System == summarizeSystem {
			return say("S")(r)
		}
		if len(r.Messages) > 12 {
			return nil, &ModelError{Event: protocol.ErrorEvent{Type: "error", Kind: protocol.KindContextOverflow, Message: "prompt is too long"}}
		}
		n++
		if n > 10 {
			return say("done")(r)
		}
		return call("echo", fmt.Sprintf(`{"n":%d}`, n))(r)
	}}}
	h := newHarness(t, llm, okTool(strings.Repeat("o", 500)), "t")
	h.opts.ContextWindow = 0
	h.opts.KeepMessages = 4
	if res := h.run(t); res.State != Done || res.TasksDone != 1 {
		t.Fatalf("%+v\n%s", res, h.out.String())
	}
	mem, _ := os.ReadFile(filepath.Join(h.sess.Dir, MemoryFile))
	if !bytes.Contains(mem, []byte(`"type":"summary"`)) || !strings.Contains(h.out.String(), "context overflow reported") {
		t.Fatal("no compaction after the overflow")
	}
}

// blockingTools closes called when a call starts, then waits for its
// context.
type blockingTools struct {
	funcTools
	called chan struct{}
	once   sync.Once
}

func (b *blockingTools) Call(ctx context.Context, _ []protocol.ToolCall) ([]protocol.ToolResult, error) {
	b.once.Do(func() { close(b.called) })
	<-ctx.Done()
	return nil, ctx.Err()
}

// leaseLostOnceCalled renews a lease until the tools are called, then
// loses it: the loss comes while a tool runs, however long the steps
// before it take on a loaded machine.
type leaseLostOnceCalled struct {
	leaseSource
	called chan struct{}
}

func (s *leaseLostOnceCalled) Renew(ctx context.Context, t *protocol.Task) error {
	select {
	case <-s.called:
		return s.leaseSource.Renew(ctx, t)
	default:
		return nil
	}
}

// A lease lost while a tool runs fails the task, not the run.
func TestLeaseLostWhileExecuting(t *testing.T) {
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){call("echo", `{}`)}}
	tools := &blockingTools{called: make(chan struct{})}
	h := newHarness(t, llm, tools, "t")
	src := &leaseLostOnceCalled{leaseSource: leaseSource{ListSource: ListSource{Tasks: []protocol.Task{NewTask(TaskInput{ID: "q1", Prompt: "p"}, time.Now())}}}, called: tools.called}
	h.opts.Source = src
	d, _ := teamdir.New(t.TempDir(), "tm")
	d.Ensure()
	h.opts.Team, h.opts.Worker = fileTeam(d), "1"
	h.opts.Heartbeat, h.opts.Lease = 10*time.Millisecond, 30*time.Millisecond
	res := h.run(t)
	if res.State != Done || src.failed != 0 {
		t.Fatalf("res %+v failed %d\n%s", res, src.failed, h.out.String())
	}
	if !strings.Contains(h.out.String(), `"from":"executing","to":"pick_task","reason":"lease lost`) {
		t.Errorf("no lease loss in executing:\n%s", h.out.String())
	}
}

// The epoch counts incarnations: a record pg-monitor seeded for this very
// process (same pid and start time) keeps its epoch; any other record is
// an earlier incarnation, and the epoch goes up by one.
func TestWorkerEpoch(t *testing.T) {
	pid, start, _ := proc.Self()
	for _, c := range []struct {
		seed protocol.Worker
		want int
	}{
		{protocol.Worker{Worker: "1", PID: pid, PIDStart: start, Epoch: 4}, 4},
		{protocol.Worker{Worker: "1", PID: pid + 1, PIDStart: start, Epoch: 4}, 5},
		{protocol.Worker{Worker: "1", PID: pid, PIDStart: "other", Epoch: 4}, 5},
	} {
		h := newHarness(t, &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}, okTool("x"), "t")
		d, _ := teamdir.New(t.TempDir(), "tm")
		d.Ensure()
		if err := d.WriteWorker(&c.seed); err != nil {
			t.Fatal(err)
		}
		h.opts.Team, h.opts.Worker = fileTeam(d), "1"
		h.run(t)
		w, err := d.ReadWorker("1")
		if err != nil || w.Epoch != c.want {
			t.Errorf("seeded %+v: epoch %d, want %d (%v)", c.seed, w.Epoch, c.want, err)
		}
	}
}

// retrySource records what each failed task asked for.
type retrySource struct {
	*ListSource
	retries []bool
}

func (s *retrySource) Fail(ctx context.Context, t *protocol.Task, reason string, retry bool) error {
	s.retries = append(s.retries, retry)
	return s.ListSource.Fail(ctx, t, reason, retry)
}

// A task failed by a model error is retried unless another attempt would
// fail the same way: a bad request, or an answer too large to stream.
func TestModelFailureRetryByKind(t *testing.T) {
	for _, c := range []struct {
		kind      string
		retryable bool
		want      bool
	}{
		{protocol.KindOverloaded, true, true},
		{protocol.KindServer, false, true},
		{protocol.KindBadRequest, false, false},
		{protocol.KindResponseTooLarge, false, false},
	} {
		t.Run(c.kind, func(t *testing.T) {
			fail := func(*protocol.Request) (*protocol.EndEvent, error) {
				return nil, &ModelError{Event: protocol.ErrorEvent{Type: "error", Kind: c.kind, Retryable: c.retryable, Message: "it failed"}}
			}
			h := newHarness(t, &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){fail}}, okTool("x"), "t")
			src := &retrySource{ListSource: h.opts.Source.(*ListSource)}
			h.opts.Source = src
			h.run(t)
			if len(src.retries) != 1 || src.retries[0] != c.want {
				t.Fatalf("retries %v, want [%v]\n%s", src.retries, c.want, h.out.String())
			}
		})
	}
}

// A tool call cut off by max_tokens in its input is never run: the answer
// is a max_tokens answer like any other, and the model is told the call
// was not run.
func TestMaxTokensInToolCallContinues(t *testing.T) {
	cut := func(*protocol.Request) (*protocol.EndEvent, error) {
		end, _ := say("Writing the file now:")(nil)
		end.StopReason = protocol.StopMaxTokens
		end.Incomplete = []protocol.IncompleteToolCall{{ID: "toolu_1", Name: "make_file", PartialInput: `{"path":"f","content":"aaa`}}
		return end, nil
	}
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){cut, say("done <promise>OK</promise>")}}
	ran := 0
	tools := &funcTools{f: func(c protocol.ToolCall) protocol.ToolResult {
		ran++
		return protocol.ToolResult{Type: "result", ID: c.ID, Name: c.Name, OK: true}
	}}
	h := newHarness(t, llm, tools, "t")
	h.opts.Promise = "OK"
	res := h.run(t)
	if res.State != Done || res.TasksDone != 1 || ran != 0 || h.count("tool_call") != 0 {
		t.Fatalf("want done with no tool run, got %+v, %d runs\n%s", res, ran, h.out.String())
	}
	msgs := llm.reqs[1].Messages
	if last := msgs[len(msgs)-1]; last.Role != protocol.RoleUser || !strings.Contains(last.Content.Text(), "call to make_file; that call was not run") {
		t.Errorf("the second request does not say the call was not run: %+v", last)
	}
}

// writeLog records each write apart.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

func (w *writeLog) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}

// TestEmitterWritesABurstAtOnce: the events emitted between two waits
// leave in one write of whole lines, in order, when the writer Emit
// started runs (once the emitting goroutine waits); Marker writes what is
// buffered, then itself; a burst past maxBuffered is written at once. The
// test runs the writer itself: when the scheduler runs it is not the
// test's to choose (a preemption between two Emit calls runs it early).
func TestEmitterWritesABurstAtOnce(t *testing.T) {
	w := &writeLog{}
	e := NewEmitter(w, false)
	var writers []func()
	e.later = func(write func()) { writers = append(writers, write) }
	for i := 1; i <= 3; i++ {
		e.Emit(&protocol.LoopStateEvent{Type: protocol.LoopState, Step: i})
	}
	if got := w.all(); len(got) != 0 || len(writers) != 1 {
		t.Fatalf("before the emitting goroutine waits: writes %q and %d writers, want none and 1", got, len(writers))
	}
	writers[0]()
	got := w.all()
	lines := strings.Split(strings.TrimSuffix(strings.Join(got, ""), "\n"), "\n")
	if len(got) != 1 || len(lines) != 3 {
		t.Fatalf("writes %q, want the burst of 3 in one", got)
	}
	for i, want := range []string{`"step":1`, `"step":2`, `"step":3`} {
		if !strings.Contains(lines[i], want) {
			t.Fatalf("first write %q: line %d lacks %s", got[0], i+1, want)
		}
	}
	e.Emit(&protocol.LoopStateEvent{Type: protocol.LoopState, Step: 4})
	e.Marker(MarkerDone)
	got = w.all()
	if len(got) != 2 || !strings.HasSuffix(got[1], "}\n"+MarkerDone+"\n") || !strings.Contains(got[1], `"step":4`) {
		t.Fatalf("writes %q, want the 4th event then the marker in the second", got)
	}
	// The writer of the 4th event runs after the marker: nothing is left.
	if len(writers) != 2 {
		t.Fatalf("%d writers started, want 2", len(writers))
	}
	writers[1]()
	if err := e.Err(); err != nil || len(w.all()) != 2 {
		t.Errorf("Err: %v after %d writes", err, len(w.all()))
	}

	big := &writeLog{}
	e = NewEmitter(big, false)
	e.later = func(func()) { t.Error("an event past maxBuffered waits for a writer") }
	long := strings.Repeat("x", maxBuffered)
	e.Emit(&protocol.LoopLogEvent{Type: protocol.LoopLog, Level: "info", Message: long})
	if n := len(big.all()); n != 1 {
		t.Errorf("an event of %d bytes: %d writes before the emitter waited, want 1", len(long), n)
	}
}

// TestEmitterWritesOnItsOwn: the writer Emit starts runs by itself, on
// pg-loop's one processor, once the emitting goroutine waits: the events
// are written, whole lines in order, with no Flush or Marker.
func TestEmitterWritesOnItsOwn(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // as pg-loop runs (cli.Spec.Waits)
	w := &writeLog{}
	e := NewEmitter(w, false)
	for i := 1; i <= 3; i++ {
		e.Emit(&protocol.LoopStateEvent{Type: protocol.LoopState, Step: i})
	}
	var all string
	for deadline := time.Now().Add(10 * time.Second); strings.Count(all, "\n") < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("writes %q 10 s after the emitting goroutine began to wait, want the 3 events", w.all())
		}
		all = strings.Join(w.all(), "")
	}
	for _, wr := range w.all() {
		if !strings.HasSuffix(wr, "\n") {
			t.Errorf("write %q ends inside a line", wr)
		}
	}
	lines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
	for i, want := range []string{`"step":1`, `"step":2`, `"step":3`} {
		if len(lines) != 3 || !strings.Contains(lines[i], want) {
			t.Fatalf("written %q: line %d lacks %s", all, i+1, want)
		}
	}
}

// panickyLLM is a model component with a bug.
type panickyLLM struct{}

func (panickyLLM) Call(context.Context, *protocol.Request, func(any)) (*protocol.EndEvent, error) {
	panic("a bug in the model component")
}
func (panickyLLM) Close() error { return nil }

// TestPanicLeavesTheEventsBeforeIt: a run that panics (a bug; cli.Run
// reports it as an internal error) has written the events emitted before
// the panic, which are what tells where it happened.
func TestPanicLeavesTheEventsBeforeIt(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // as pg-loop runs (cli.Spec.Waits)
	h := newHarness(t, panickyLLM{}, okTool("x"), "t")
	r, err := NewRunner(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the run did not panic")
			}
		}()
		r.Run(context.Background())
	}()
	if out := h.out.String(); !strings.Contains(out, `"task":"task-1"`) {
		t.Errorf("the events before the panic were not written: %q", out)
	}
}
