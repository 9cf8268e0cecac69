package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/loop/internal/fake"
	"github.com/powerglide/powerglide/pkg/protocol"
)

func TestBreaker(t *testing.T) {
	b := Breaker{SameMax: 3, FailMax: 2}
	c := func(in string) protocol.ToolCall { return protocol.ToolCall{Name: "bash", Input: json.RawMessage(in)} }
	if b.Call(c(`{"a":1}`)) != nil || b.Call(c(`{"a":2}`)) != nil || b.Call(c(`{"a":1}`)) != nil || b.Call(c(` { "a" : 1 }`)) != nil {
		t.Fatal("tripped on varied calls")
	}
	if err := b.Call(c(`{"a":1}`)); err == nil {
		t.Fatal("the same call 3 times in a row did not trip")
	}
	b.Reset()
	e := "x"
	fail := protocol.ToolResult{Name: "bash", Error: &e}
	ok := protocol.ToolResult{Name: "bash", OK: true}
	bc := c(`{}`)
	if b.Result(bc, fail) != nil || b.Result(bc, ok) != nil || b.Result(bc, fail) != nil {
		t.Fatal("a success must reset the failure count")
	}
	if b.Result(bc, protocol.ToolResult{Name: "read", Error: &e}) != nil {
		t.Fatal("failures of another tool count apart")
	}
	var le *LimitError
	if err := b.Result(bc, fail); !errors.As(err, &le) || le.Limit != LimitBreaker {
		t.Fatalf("want a breaker trip, got %v", err)
	}
	off := Breaker{}
	for i := 0; i < 10; i++ {
		if off.Call(c(`{}`)) != nil || off.Result(bc, fail) != nil {
			t.Fatal("a zero breaker tripped")
		}
	}
}

var sonnet = &ModelInfo{ID: "anthropic/claude-sonnet-4-5", ContextWindow: 200000, InputPerMTok: 3, OutputPerMTok: 15}

func TestBudgetCheck(t *testing.T) {
	cases := []struct {
		b     Budget
		spent protocol.Usage
		in    int
		max   int
		limit string
	}{
		{Budget{}, protocol.Usage{InputTokens: 1e9}, 1e9, 1e9, ""},
		{Budget{Tokens: 1000}, protocol.Usage{}, 400, 600, ""},
		{Budget{Tokens: 1000}, protocol.Usage{}, 401, 600, LimitBudgetTokens},
		{Budget{Tokens: 1000}, protocol.Usage{OutputTokens: 1}, 400, 600, LimitBudgetTokens},
		{Budget{USD: 1}, protocol.Usage{}, 1e6, 1e6, ""}, // no price known yet
		{Budget{USD: 1}, protocol.Usage{CostUSD: 1}, 1, 1, LimitBudgetUSD},
		{Budget{USD: 1}, protocol.Usage{InputTokens: 1000, CostUSD: 0.5}, 100, 100, ""}, // 0.05 + 0.25
		{Budget{USD: 1}, protocol.Usage{InputTokens: 1000, CostUSD: 0.5}, 100, 1000, LimitBudgetUSD},
		// Known prices ($3 in, $15 out per Mtok) price the very first call:
		// 1000 in + 10000 max out = $0.153.
		{Budget{USD: 0.15, Prices: sonnet}, protocol.Usage{}, 1000, 10000, LimitBudgetUSD},
		{Budget{USD: 0.16, Prices: sonnet}, protocol.Usage{}, 1000, 10000, ""},
		// a cache-write price dearer than input counts for the input
		{Budget{USD: 0.1535, Prices: &ModelInfo{InputPerMTok: 3, OutputPerMTok: 15, CacheWritePerMTok: 3.75}}, protocol.Usage{}, 1000, 10000, LimitBudgetUSD},
		// a component that reports no cost is priced from its tokens
		{Budget{USD: 0.16, Prices: sonnet}, protocol.Usage{OutputTokens: 1000}, 1000, 10000, LimitBudgetUSD},
		{Budget{USD: 1, Prices: &ModelInfo{}}, protocol.Usage{}, 1e6, 1e6, ""}, // unpriced model: the fallback
	}
	for i, c := range cases {
		err := c.b.Check(c.spent, c.in, c.max)
		var le *LimitError
		got := ""
		if errors.As(err, &le) {
			got = le.Limit
		}
		if got != c.limit {
			t.Errorf("case %d: got %q (%v), want %q", i, got, err, c.limit)
		}
	}
}

func TestModelTable(t *testing.T) {
	table := []ModelInfo{*sonnet, {ID: "anthropic/claude-haiku-4-5", ContextWindow: 100000, InputPerMTok: 1, OutputPerMTok: 5}, {ID: "ollama/qwen3:8b", ContextWindow: 40960}}
	if m, ok := FindModel(table, "anthropic/claude-sonnet-4-5-20250929"); !ok || m.ID != sonnet.ID {
		t.Errorf("dated id: %+v %v", m, ok)
	}
	if _, ok := FindModel(table, "anthropic/claude-sonnet-4"); ok {
		t.Errorf("a shorter id must not match a longer one")
	}
	m, ok := ChainModel(table, "anthropic/claude-haiku-4-5, anthropic/claude-sonnet-4-5")
	if !ok || m.ContextWindow != 100000 || m.InputPerMTok != 3 || m.OutputPerMTok != 15 {
		t.Errorf("chain: %+v", m)
	}
	if m, ok := ChainModel(table, "anthropic/claude-sonnet-4-5,ollama/qwen3:8b"); !ok || m.Priced() || m.ContextWindow != 40960 {
		t.Errorf("a chain with an unpriced model is unpriced: %+v", m)
	}
	if m, ok := ChainModel(table, "anthropic/claude-sonnet-4-5,custom/x"); !ok || m.Priced() || m.ContextWindow != 200000 {
		t.Errorf("a chain with an unknown model is unpriced: %+v", m)
	}
	if _, ok := ChainModel(table, "custom/x"); ok {
		t.Errorf("unknown model found")
	}
}

func TestVelocity(t *testing.T) {
	p := filepath.Join(t.TempDir(), "v")
	if _, set, err := ReadVelocity(p); set || err != nil {
		t.Fatal("a missing file is unset")
	}
	for in, want := range map[string]float64{"2\n": 2, " 0 ": 0, "0.5": 0.5} {
		os.WriteFile(p, []byte(in), 0o644)
		if v, set, err := ReadVelocity(p); !set || err != nil || v != want {
			t.Errorf("%q: %v %v %v", in, v, set, err)
		}
	}
	for _, bad := range []string{"fast", "-1"} {
		os.WriteFile(p, []byte(bad), 0o644)
		if _, _, err := ReadVelocity(p); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if VelocityDelay(2) != 500*time.Millisecond || VelocityDelay(0) != 0 {
		t.Error("delay_ms = 1000/velocity")
	}
}

func TestPromiseAndCommitMessage(t *testing.T) {
	if !HasPromise("all good\n<promise>DONE</promise>", "DONE") || !HasPromise("<promise> DONE </promise>", "DONE") {
		t.Error("promise not found")
	}
	if HasPromise("I will say <promise>DONE-ish</promise>", "DONE") || HasPromise("DONE", "DONE") {
		t.Error("false promise")
	}
	msg := CommitMessage("## Fix the parser\n\nIt now handles tabs.\n<promise>DONE</promise>", "fallback")
	if msg != "Fix the parser\n\nIt now handles tabs.\n" {
		t.Errorf("message %q", msg)
	}
	if CommitMessage("  ", "the task title") != "the task title\n" {
		t.Error("fallback not used")
	}
	long := CommitMessage(strings.Repeat("word ", 40), "")
	if len(strings.SplitN(long, "\n", 2)[0]) > 72 {
		t.Errorf("subject too long: %q", long)
	}
}

func TestProjectContext(t *testing.T) {
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, ".git"), 0o755)
	sub := filepath.Join(root, "a", "b")
	os.MkdirAll(sub, 0o755)
	os.WriteFile(filepath.Join(root, "AGENTS.md"), []byte("root rules"), 0o644)
	os.WriteFile(filepath.Join(root, "a", "CLAUDE.md"), []byte("a rules"), 0o644)
	os.WriteFile(filepath.Join(sub, "AGENTS.md"), []byte("b rules"), 0o644)
	os.WriteFile(filepath.Join(filepath.Dir(root), "AGENTS.md"), []byte("outside the repo"), 0o644)
	defer os.Remove(filepath.Join(filepath.Dir(root), "AGENTS.md"))
	pc, warns := ProjectContext(sub)
	if len(warns) > 0 {
		t.Errorf("warnings: %v", warns)
	}
	i, j, k := strings.Index(pc, "root rules"), strings.Index(pc, "a rules"), strings.Index(pc, "b rules")
	if i < 0 || j < 0 || k < 0 || !(i < j && j < k) {
		t.Fatalf("want root, a, b in order:\n%s", pc)
	}
	if strings.Contains(pc, "outside the repo") {
		t.Error("walked past the repository root")
	}
	// caps: a huge file is cut; the total cap drops the farthest files
	os.WriteFile(filepath.Join(sub, "AGENTS.md"), []byte(strings.Repeat("b", 100<<10)), 0o644)
	pc, _ = ProjectContext(sub)
	if !strings.Contains(pc, "truncated") || len(pc) > contextTotalCap+4096 {
		t.Errorf("not capped: %d bytes", len(pc))
	}
	// without a repository, only the workdir
	lone := t.TempDir()
	os.WriteFile(filepath.Join(lone, "CLAUDE.md"), []byte("lone"), 0o644)
	if pc, _ := ProjectContext(lone); !strings.Contains(pc, "lone") {
		t.Errorf("workdir file missing: %q", pc)
	}
}

func TestReadTasks(t *testing.T) {
	ts, err := ReadTasks(strings.NewReader(`{"prompt":"a"}`+"\n\n"+`{"id":"x","title":"b","verify":"true","labels":{"fresh":"true"}}`+"\n"), "in")
	if err != nil || len(ts) != 2 || ts[0].ID != "task-1" || ts[0].Title != "a" || ts[1].Prompt != "b" || ts[1].Verify != "true" || ts[1].Labels["fresh"] != "true" {
		t.Fatalf("%v %+v", err, ts)
	}
	for in, want := range map[string]string{
		`{"prompt":"a","bogus":1}`:                                   "in:1: ",
		`{"id":"a","prompt":"x"}` + "\n" + `{"id":"a","prompt":"y"}`: "in:2: duplicate task id",
		`{"title":""}`: `needs a "prompt" or a "title"`,
		`not json`:     "in:1",
	} {
		_, err := ReadTasks(strings.NewReader(in), "in")
		var le *jsonl.LineError
		if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &le) {
			t.Errorf("%q: got %v, want %q", in, err, want)
		}
	}
}

func TestPruneAndSummary(t *testing.T) {
	big := strings.Repeat("z", 1000)
	msgs := []protocol.Message{
		{Role: "user", Content: protocol.Content{{Type: "text", Text: "task"}}},
		{Role: "assistant", Content: protocol.Content{{Type: "tool_call", ID: "1", Name: "x"}}},
		{Role: "tool", Content: protocol.Content{{Type: "tool_result", ID: "1", Output: big}}},
		{Role: "assistant", Content: protocol.Content{{Type: "tool_call", ID: "2", Name: "x"}}},
		{Role: "tool", Content: protocol.Content{{Type: "tool_result", ID: "2", Output: big}}},
	}
	p := pruneBefore(msgs, 3)
	if !strings.HasPrefix(p[2].Content[0].Output, "[pruned: 1000 bytes") || p[4].Content[0].Output != big || msgs[2].Content[0].Output != big {
		t.Fatal("prune wrong or changed its input")
	}
	cut := summaryCut(msgs, 2)
	if cut != 3 {
		t.Fatalf("cut %d", cut)
	}
	s := applySummary(msgs, cut, "SUM")
	if len(s) != 3 || !strings.Contains(s[0].Content.Text(), "task") || !strings.Contains(s[0].Content.Text(), "SUM") || s[1].Role != "assistant" {
		t.Fatalf("summary %+v", s)
	}
	if summaryCut(msgs[:2], 4) != 0 {
		t.Error("nothing old enough must give 0")
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPipeline(t *testing.T) {
	dir := t.TempDir()
	pf := filepath.Join(dir, "p.json")
	writeFile(t, filepath.Join(dir, "prompts", "b.md"), "B for {{who}} after {{previous_stage}} ({{iteration}}/{{max_iterations}}) {{unknown}}")
	writeFile(t, pf, `{"name":"p","vars":{"who":"me"},"stages":[
	 {"name":"a","prompt":"A {{who}}","exit":{"file":"out/a.txt","min_lines":2}},
	 {"name":"b","prompt_file":"prompts/b.md","exit":{"dir":"out/d","min_files":2,"command":"test -e ok"},"max_iterations":2},
	 {"name":"c","prompt":"C","exit":{"promise":"SHIP","jq":".current.iteration >= 2 and (.stages[0].status == \"done\")"}}]}`)
	p, err := ReadPipeline(pf)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	state := filepath.Join(t.TempDir(), "s.json")
	ps, err := OpenPipeline(p, state, work, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ta, _ := ps.Next(ctx)
	if ta.ID != "stage-1-a" || ps.Prompt(ta, 1) != "A me" || ta.Labels["fresh"] != "true" || ta.Labels["max_iterations"] != "10" {
		t.Fatalf("stage a: %+v %q", ta, ps.Prompt(ta, 1))
	}
	if ok, detail, _ := ps.Check(ctx, ta, "", 1); ok || !strings.Contains(detail, "does not exist") {
		t.Fatalf("a: %v %s", ok, detail)
	}
	writeFile(t, filepath.Join(work, "out", "a.txt"), "1\n2")
	if ok, _, err := ps.Check(ctx, ta, "", 2); !ok || err != nil {
		t.Fatalf("a with 2 lines: %v", err)
	}
	ps.Complete(ctx, ta, nil)

	// A killed run resumes at stage b, with its iteration count.
	tb, _ := ps.Next(ctx)
	ps.Check(ctx, tb, "", 1)
	ps2, err := OpenPipeline(p, state, work, false)
	if err != nil {
		t.Fatal(err)
	}
	tb, _ = ps2.Next(ctx)
	if tb.ID != "stage-2-b" || ps2.Iterations(tb) != 1 {
		t.Fatalf("resumed at %s iteration %d", tb.ID, ps2.Iterations(tb))
	}
	if got := ps2.Prompt(tb, 2); got != "B for me after a (2/2) {{unknown}}" {
		t.Errorf("prompt %q", got)
	}
	writeFile(t, filepath.Join(work, "out", "d", "1"), "")
	writeFile(t, filepath.Join(work, "out", "d", "2"), "")
	if ok, detail, _ := ps2.Check(ctx, tb, "", 2); ok || !strings.Contains(detail, "test -e ok") {
		t.Fatalf("b without ok: %v %s", ok, detail)
	}
	writeFile(t, filepath.Join(work, "ok"), "")
	if ok, _, _ := ps2.Check(ctx, tb, "", 2); !ok {
		t.Fatal("b should pass")
	}
	ps2.Complete(ctx, tb, nil)
	tc, _ := ps2.Next(ctx)
	if tc.Labels["promise"] != "SHIP" {
		t.Errorf("labels %v", tc.Labels)
	}
	if ok, _, _ := ps2.Check(ctx, tc, "<promise>SHIP</promise>", 1); ok {
		t.Error("jq condition ignored")
	}
	if ok, _, _ := ps2.Check(ctx, tc, "no promise", 2); ok {
		t.Error("promise condition ignored")
	}
	if ok, d, err := ps2.Check(ctx, tc, "<promise>SHIP</promise>", 2); !ok || err != nil {
		t.Fatalf("c: %s %v", d, err)
	}
	ps2.Complete(ctx, tc, nil)
	if t4, _ := ps2.Next(ctx); t4 != nil || ps2.State().Status != "done" {
		t.Errorf("pipeline not finished: %+v", ps2.State())
	}
	// another set of stages needs a reset
	writeFile(t, pf, `{"stages":[{"name":"z","prompt":"z","exit":{"file":"z"}}]}`)
	p2, _ := ReadPipeline(pf)
	if _, err := OpenPipeline(p2, state, work, false); err == nil {
		t.Error("state of other stages accepted")
	}
	if _, err := OpenPipeline(p2, state, work, true); err != nil {
		t.Error(err)
	}
}

func TestReadPipelineErrors(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		`{"stages":[]}`: "stages",
		`{"stages":[{"prompt":"x","exit":{"file":"f"}}]}`:                                                          "stages[0].name",
		`{"stages":[{"name":"a","exit":{"file":"f"}}]}`:                                                            "prompt",
		`{"stages":[{"name":"a","prompt":"x","exit":{"jq":"..["}}]}`:                                               "stages[0].exit.jq",
		`{"stages":[{"name":"a","prompt":"x","exit":{"file":"f"}},{"name":"a","prompt":"y","exit":{"file":"g"}}]}`: "duplicate stage",
		`{"stages":[{"name":"a","prompt":"x","exit":{"file":"f"},"colour":1}]}`:                                    "unknown field",
		`{"stages":[{"name":"a","prompt_file":"nope.md","exit":{"file":"f"}}]}`:                                    "prompt_file",
	} {
		pf := filepath.Join(dir, "p.json")
		writeFile(t, pf, body)
		_, err := ReadPipeline(pf)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", body, err, want)
		}
	}
}

func TestSessionsAndLatest(t *testing.T) {
	home := t.TempDir()
	now := time.Now()
	a, _ := CreateSession(home, "/w/one", now)
	b, _ := CreateSession(home, "/w/one", now.Add(time.Second))
	c, _ := CreateSession(home, "/w/two", now.Add(2*time.Second))
	for _, s := range []*Session{a, b, c} {
		s.Close()
	}
	if id, err := LatestSession(home, "/w/one"); err != nil || id != b.Info.ID {
		t.Errorf("latest %s %v, want %s", id, err, b.Info.ID)
	}
	var nf *NotFoundError
	if _, err := LatestSession(home, "/w/none"); !errors.As(err, &nf) {
		t.Errorf("want not found, got %v", err)
	}
	if _, err := OpenSession(home, "../x"); err == nil {
		t.Error("a path as session id accepted")
	}
	s, err := OpenSession(home, a.Info.ID)
	if err != nil || s.Info.Workdir != "/w/one" {
		t.Fatal(err)
	}
	s.Close()

	// A session.json that is a named pipe (no writer) blocked both in
	// open(2) for ever: now it is refused at once.
	fifo := filepath.Join(c.Dir, SessionFile)
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		if id, err := LatestSession(home, "/w/one"); err != nil || id != b.Info.ID {
			done <- fmt.Errorf("latest %s %v, want %s", id, err, b.Info.ID)
			return
		}
		_, err := OpenSession(home, c.Info.ID)
		if err == nil || !strings.Contains(err.Error(), "a named pipe (FIFO), not a regular file: refused") {
			done <- fmt.Errorf("open: %v, want a named pipe refused", err)
			return
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("still blocked on session.json, a named pipe, after a minute")
	}
}

// The example pipeline shipped in testdata reads and runs its stages in order.
func TestExamplePipeline(t *testing.T) {
	p, err := ReadPipeline(filepath.Join("..", "..", "testdata", "pipelines", "feature.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range p.Stages {
		names = append(names, s.Name)
		if s.Prompt == "" {
			t.Errorf("stage %s has no prompt", s.Name)
		}
	}
	if strings.Join(names, ",") != "architect,qa,security,implementer,verifier" {
		t.Fatalf("stages %v", names)
	}
	ps, err := OpenPipeline(p, filepath.Join(t.TempDir(), "s.json"), t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	task, _ := ps.Next(context.Background())
	if got := ps.Prompt(task, 1); !strings.Contains(got, "describe the feature here") || strings.Contains(got, "{{") {
		t.Errorf("architect prompt not expanded: %s", got)
	}

	// The verifier's exit needs its report, passing tests and its verdict.
	work := t.TempDir()
	p.Vars["test_cmd"] = "test -e tests-pass"
	ps, err = OpenPipeline(p, filepath.Join(t.TempDir(), "s.json"), work, false)
	if err != nil {
		t.Fatal(err)
	}
	verifier := &protocol.Task{ID: "stage-5-verifier"}
	writeFile(t, filepath.Join(work, "docs", "plan", "VERIFIED.md"), "# Verified\n\n- tests: PASS\n")
	for _, c := range []struct {
		answer, file string
		ok           bool
	}{
		{"All checked.\nVERDICT: PASS\n", "tests-pass", true},
		{"The tests pass but the plan's step 3 is missing.\nVERDICT: FAIL", "tests-pass", false},
		{"Looks fine.", "tests-pass", false},
		{"VERDICT: PASS", "", false}, // the tests fail
	} {
		os.Remove(filepath.Join(work, "tests-pass"))
		if c.file != "" {
			writeFile(t, filepath.Join(work, c.file), "")
		}
		ok, detail, err := ps.Check(context.Background(), verifier, c.answer, 1)
		if err != nil || ok != c.ok {
			t.Errorf("verifier with answer %q, file %q: %v %s %v; want %v", c.answer, c.file, ok, detail, err, c.ok)
		}
	}
}

func TestRenderReadable(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := "boom"
	cases := map[any]string{
		&protocol.LoopStateEvent{TS: ts, Step: 3, From: "thinking", To: "tool_call", Reason: "2 tool calls"}: "03:04:05 [3] thinking   → tool_call  (2 tool calls)",
		&protocol.LoopToolResultEvent{TS: ts, Step: 1, Result: protocol.ToolResult{Name: "bash", Error: &e}}: "← bash FAILED: boom",
		&protocol.LoopVerifyEvent{TS: ts, Command: "make", ExitCode: 2, Attempt: 1}:                          `verify #1 "make" failed (exit 2)`,
		&protocol.LoopCommitEvent{TS: ts, Skipped: true}:                                                     "commit skipped: nothing changed",
		&protocol.LoopLimitEvent{TS: ts, Limit: "steps", Reason: "too many"}:                                 "LIMIT steps: too many",
		&protocol.LoopTaskEvent{TS: ts, Task: "t1", Status: "done", Title: "x"}:                              "task t1 done: x",
	}
	for ev, want := range cases {
		if got := Render(ev); !strings.Contains(got, want) || strings.Contains(got, "\n") {
			t.Errorf("Render = %q, want it to contain %q", got, want)
		}
	}
	var b strings.Builder
	em := NewEmitter(&b, true)
	em.Emit(&protocol.LoopLogEvent{TS: ts, Level: "info", Message: "hello"})
	em.Marker(MarkerDone)
	if b.String() != "03:04:05 info: hello\n<POWERGLIDE_DONE>\n" {
		t.Errorf("text output %q", b.String())
	}
}

// The estimate stays close to (and not under ~90% of) the encoded size / 4.
func TestEstimateTokens(t *testing.T) {
	req := &protocol.Request{System: strings.Repeat("s", 1000), Tools: fake.ToolDefs, Messages: []protocol.Message{
		{Role: "user", Content: protocol.Content{{Type: "text", Text: strings.Repeat("line\n", 200)}}},
		{Role: "assistant", Content: protocol.Content{{Type: "tool_call", ID: "a", Name: "bash", Input: json.RawMessage(`{"command":"ls -la"}`)}}},
		{Role: "tool", Content: protocol.Content{{Type: "tool_result", ID: "a", Output: strings.Repeat("x\"y\n", 300)}}},
	}}
	b, _ := json.Marshal(req)
	exact := len(b) / 4
	got := EstimateTokens(req)
	if got < exact*9/10 || got > exact*13/10 {
		t.Errorf("estimate %d, encoded/4 %d", got, exact)
	}
}

// A coprocess still busy when the loop closes it (a hung model call) is
// sent SIGTERM soon after its stdin closes, not left to the SIGKILL 2 s later.
func TestCoprocessCloseTermsABusyChild(t *testing.T) {
	dir := t.TempDir()
	mark, ready := filepath.Join(dir, "term"), filepath.Join(dir, "ready")
	c := newCoprocess("model", `trap 'echo term > `+mark+`; exit 0' TERM; touch `+ready+`; sleep 100 & wait`, os.Stderr)
	c.mu.Lock()
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
	c.mu.Unlock()
	// Closed once the trap is set: a shell still starting dies of SIGTERM
	// without writing the mark.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the coprocess never started")
		}
	}
	c.Close()
	if b, err := os.ReadFile(mark); err != nil || strings.TrimSpace(string(b)) != "term" {
		t.Fatalf("the busy child was not sent SIGTERM: %v %q", err, b)
	}
}

// TestVelocityFileReadWhenChanged: a step reads the velocity file only
// when its stat changed, or while its last change is within the clock's
// reach of the last read (a same-size write in the same tick); every
// change shows at the next step.
func TestVelocityFileReadWhenChanged(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "v")
	f := newVelocityFile(p)
	f.racy = 20 * time.Millisecond
	check := func(want float64, wantSet bool) {
		t.Helper()
		if v, set, err := f.read(); err != nil || set != wantSet || v != want {
			t.Fatalf("read: %v %v %v, want %v %v", v, set, err, want, wantSet)
		}
	}
	check(0, false) // missing
	os.WriteFile(p, []byte("2\n"), 0o644)
	check(2, true)
	os.WriteFile(p, []byte("3\n"), 0o644) // same size, likely the same tick
	check(3, true)
	time.Sleep(3 * f.racy)
	check(3, true) // read once more: the last read was within racy of the change
	reads := f.reads
	for range 10 {
		check(3, true)
	}
	if f.reads != reads {
		t.Errorf("an unchanged file read %d times in 10 steps, want 0", f.reads-reads)
	}
	os.WriteFile(p, []byte("0.5\n"), 0o644)
	check(0.5, true)
	time.Sleep(3 * f.racy)
	check(0.5, true)
	tmp := filepath.Join(dir, "new")
	os.WriteFile(tmp, []byte("0.7\n"), 0o644)
	os.Rename(tmp, p) // replaced: another inode
	check(0.7, true)
	os.WriteFile(p, nil, 0o644)
	check(0, false)
	os.Remove(p)
	check(0, false)
	os.WriteFile(p, []byte("fast"), 0o644)
	if _, _, err := f.read(); err == nil {
		t.Error("a bad velocity accepted")
	}
}

// secondsFS is a file system that keeps whole seconds: its files' times
// are fixed at when.
type secondsFS struct{ when time.Time }

func (fs secondsFS) stat(p string) (os.FileInfo, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	st := *fi.Sys().(*syscall.Stat_t)
	st.Ctim = syscall.Timespec{Sec: fs.when.Unix()}
	st.Mtim = st.Ctim
	return statOf{fi, &st}, nil
}

type statOf struct {
	os.FileInfo
	st *syscall.Stat_t
}

func (s statOf) Sys() any { return s.st }

// TestVelocityFileWholeSeconds: on a file system that keeps whole
// seconds, a same-size write within the second of the last read is seen
// at the next step, though the file's stat did not change.
func TestVelocityFileWholeSeconds(t *testing.T) {
	p := filepath.Join(t.TempDir(), "v")
	f := newVelocityFile(p)
	f.racy = 20 * time.Millisecond
	f.stat = secondsFS{when: time.Now().Add(-500 * time.Millisecond).Truncate(time.Second)}.stat
	os.WriteFile(p, []byte("2\n"), 0o644)
	if v, _, _ := f.read(); v != 2 {
		t.Fatalf("read %v, want 2", v)
	}
	os.WriteFile(p, []byte("3\n"), 0o644) // same size, within the same second
	if v, _, _ := f.read(); v != 3 {
		t.Errorf("read %v after a same-size write within the second, want 3", v)
	}
}
