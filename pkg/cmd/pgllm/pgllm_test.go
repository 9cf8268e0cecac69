package pgllm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/config"
	"github.com/powerglide/powerglide/pkg/llm"
	"github.com/powerglide/powerglide/pkg/llm/llmtest"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/protocol/validate"
	"golang.org/x/sys/unix"
)

func TestChooseModel(t *testing.T) {
	cases := []struct {
		flag, env, req, replay, want string
	}{
		{"", "", "", "", "anthropic/claude-sonnet-4-5"},
		{"", "openai/gpt-4o", "", "", "openai/gpt-4o"},
		{"", "openai/gpt-4o", "ollama/x", "", "ollama/x"},
		{"openai/gpt-5", "openai/gpt-4o", "ollama/x", "", "openai/gpt-5"},
		{"openai/gpt-5", "", "ollama/x", "s.jsonl", "replay/s.jsonl"},
	}
	for _, c := range cases {
		opts := config.Options{LookupEnv: func(k string) (string, bool) {
			if k == "POWERGLIDE_MODEL" && c.env != "" {
				return c.env, true
			}
			return "", false
		}, File: filepath.Join(t.TempDir(), "none.json")}
		if c.flag != "" {
			opts.Flags = map[string]string{"model": c.flag}
		}
		cfg, err := config.Load(opts)
		if err != nil {
			t.Fatal(err)
		}
		got := chooseModel(&CLI{Replay: c.replay}, cfg, &protocol.Request{Model: c.req})
		if got != c.want {
			t.Errorf("%+v: got %s", c, got)
		}
	}
}

// TestServeConcurrent runs serve in-process with many requests in flight
// at once: every event line is whole, valid and tagged with its request.
func TestServeConcurrent(t *testing.T) {
	srv := fakeAnthropic(t, "tool_use.http", 50*time.Millisecond)
	var in, out, errb bytes.Buffer
	const n = 12
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, `{"id":"q%d","messages":[{"role":"user","content":"weather %d"}]}`+"\n", i, i)
	}
	home := t.TempDir()
	io := cli.Test(&in, &out, &errb, serveEnv(home, srv.URL)...)
	code := cli.Run(context.Background(), Spec(), []string{"serve", "--model", "anthropic/claude-sonnet-4-5", "--concurrency", "6", "--record", filepath.Join(home, "rec.jsonl")}, io)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if err := validate.Lines("model-event", out.Bytes()); err != nil {
		t.Fatal(err)
	}
	ends := map[string]int{}
	perID := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ev struct{ Type, ID string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		perID[ev.ID]++
		if ev.Type == "end" {
			ends[ev.ID]++
		}
	}
	if len(ends) != n {
		t.Fatalf("ends for %d requests, want %d: %v", len(ends), n, ends)
	}
	for id, c := range perID {
		if c != 7 { // start, 2 text, 2 tool_call, usage, end
			t.Errorf("%s: %d events", id, c)
		}
	}
	if len(srv.Requests()) != n {
		t.Fatalf("%d requests reached the server", len(srv.Requests()))
	}
}

// TestServeReusesConnection: sequential requests in serve mode go over one
// warm connection, for every provider family.
func TestServeReusesConnection(t *testing.T) {
	for _, c := range []struct{ fixture, model, env string }{
		{"anthropic/text.http", "anthropic/claude-sonnet-4-5", "ANTHROPIC_BASE_URL="},
		{"anthropic/tool_use.http", "anthropic/claude-sonnet-4-5", "ANTHROPIC_BASE_URL="},
		{"openai/text.http", "openai/gpt-4o", "OPENAI_BASE_URL="},
		{"openai/tool_use.http", "openai/gpt-4o", "OPENAI_BASE_URL="},
	} {
		rs, err := llmtest.Load(filepath.Join("..", "..", "..", "testdata", "llm", c.fixture))
		if err != nil {
			t.Fatal(err)
		}
		srv := llmtest.NewServer(rs...)
		srv.SetRepeat(true)
		var in, out, errb bytes.Buffer
		const n = 4
		for i := 0; i < n; i++ {
			fmt.Fprintf(&in, `{"id":"q%d","messages":[{"role":"user","content":"hi"}]}`+"\n", i)
		}
		home := t.TempDir()
		url := srv.URL
		if strings.HasPrefix(c.model, "openai/") {
			url += "/v1"
		}
		io := cli.Test(&in, &out, &errb, "HOME="+home, "XDG_CONFIG_HOME="+home, "ANTHROPIC_API_KEY=k", "OPENAI_API_KEY=k", c.env+url)
		code := cli.Run(context.Background(), Spec(), []string{"serve", "--model", c.model, "--concurrency", "1"}, io)
		srv.Close()
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.fixture, code, errb.String())
		}
		if got := strings.Count(out.String(), `{"type":"end"`); got != n {
			t.Fatalf("%s: %d ends:\n%s", c.fixture, got, out.String())
		}
		if len(srv.Requests()) != n || srv.Conns() != 1 {
			t.Errorf("%s: %d requests over %d connections, want %d over 1", c.fixture, len(srv.Requests()), srv.Conns(), n)
		}
	}
}

// TestServeHeldConversation: an end event names the conversation serve
// holds; a request after it sends only its new messages and the provider
// gets the whole conversation; a name serve does not hold is an error of
// kind not_held; a single call refuses after.
func TestServeHeldConversation(t *testing.T) {
	srv := fakeAnthropic(t, "text.http", 0)
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home, "ANTHROPIC_API_KEY=k", "ANTHROPIC_BASE_URL=" + srv.URL}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := cli.Run(context.Background(), Spec(), []string{"serve", "--model", "anthropic/claude-sonnet-4-5"}, cli.Test(inR, outW, &errb, env...))
		outW.Close()
		done <- code
	}()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	// ask sends a request and returns its last event.
	ask := func(req string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(inW, req+"\n"); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
			var ev map[string]any
			if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
				t.Fatal(err)
			}
			if ev["type"] == "end" || ev["type"] == "error" {
				if err := validate.Lines("model-event", lines.Bytes()); err != nil {
					t.Fatal(err)
				}
				return ev
			}
		}
		t.Fatalf("no end: %v %s", lines.Err(), errb.String())
		return nil
	}
	end := ask(`{"id":"r1","system":"be brief","tools":[{"name":"bash","description":"run","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"first question"}]}`)
	held, _ := end["held"].(string)
	if end["type"] != "end" || held == "" {
		t.Fatalf("first answer %v", end)
	}
	end = ask(`{"id":"r2","after":"` + held + `","messages":[{"role":"user","content":"second question"}]}`)
	if end["type"] != "end" || end["held"] == "" || end["held"] == held {
		t.Fatalf("second answer %v", end)
	}
	reqs := srv.Requests()
	var body struct {
		System   []struct{ Text string }
		Tools    []struct{ Name string }
		Messages []struct {
			Role    string
			Content []struct{ Text string }
		}
	}
	if err := json.Unmarshal(reqs[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	// The system prompt and the tools the continuation left out are the
	// held ones.
	if len(body.System) != 1 || body.System[0].Text != "be brief" || len(body.Tools) != 1 || body.Tools[0].Name != "bash" {
		t.Fatalf("the provider got system %v and tools %v: %s", body.System, body.Tools, reqs[1].Body)
	}
	var got []string
	for _, m := range body.Messages {
		for _, c := range m.Content {
			got = append(got, m.Role+":"+c.Text)
		}
	}
	if want := "user:first question|assistant:Hello! How can I help you today?|user:second question"; strings.Join(got, "|") != want {
		t.Fatalf("the provider got %q, want %q", strings.Join(got, "|"), want)
	}
	end = ask(`{"id":"r3","after":"h999","messages":[{"role":"user","content":"lost"}]}`)
	if end["type"] != "error" || end["kind"] != protocol.KindNotHeld || end["id"] != "r3" {
		t.Fatalf("unknown conversation: %v", end)
	}
	inW.Close()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if len(srv.Requests()) != 2 {
		t.Fatalf("%d requests reached the server", len(srv.Requests()))
	}

	var out bytes.Buffer
	errb.Reset()
	code := cli.Run(context.Background(), Spec(), []string{"--model", "anthropic/claude-sonnet-4-5"},
		cli.Test(strings.NewReader(`{"after":"h1","messages":[{"role":"user","content":"hi"}]}`), &out, &errb, env...))
	if code != 2 || !strings.Contains(errb.String(), "after") {
		t.Fatalf("a single call with after: exit %d: %s", code, errb.String())
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

// TestServeWritesWhatArrivedTogether: the events of an answer that
// arrives in one piece leave serve in two writes, the start (written
// before serve waits for the stream) and the rest, not one write each, so
// that the client wakes once for them.
func TestServeWritesWhatArrivedTogether(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "llm", "anthropic", "tool_use.http"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := bytes.Cut(raw, []byte("\n\n"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body) // one piece
	}))
	defer srv.Close()
	home := t.TempDir()
	out := &writeLog{}
	var errb bytes.Buffer
	in := strings.NewReader(`{"id":"q1","messages":[{"role":"user","content":"weather?"}]}` + "\n")
	sio := cli.Test(in, out, &errb, serveEnv(home, srv.URL)...)
	if code := cli.Run(context.Background(), Spec(), []string{"serve", "--model", "anthropic/claude-sonnet-4-5"}, sio); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var kinds []string
	for _, w := range out.writes {
		var k []string
		for _, l := range strings.Split(strings.TrimSpace(w), "\n") {
			var ev struct{ Type string }
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("write %q: %v", w, err)
			}
			k = append(k, ev.Type)
		}
		kinds = append(kinds, strings.Join(k, ","))
	}
	want := []string{"start", "text,text,tool_call,tool_call,usage,end"}
	if strings.Join(kinds, " | ") != strings.Join(want, " | ") {
		t.Fatalf("writes: %q, want %q", kinds, want)
	}
}

// TestServeModels: a model-list-request gets the table `pg-llm models
// --json` prints (the config's models included), on the request stream;
// a malformed one is bad input, and serving goes on.
func TestServeModels(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"models":{"fake/small":{"context_window":6000}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home, "POWERGLIDE_CONFIG=" + filepath.Join(home, "config.json"), "ANTHROPIC_API_KEY=k"}
	var table, errb bytes.Buffer
	if code := cli.Run(context.Background(), Spec(), []string{"models", "--json"}, cli.Test(strings.NewReader(""), &table, &errb, env...)); code != 0 {
		t.Fatalf("models: exit %d: %s", code, errb.String())
	}
	var out bytes.Buffer
	in := strings.NewReader(`{"type":"models","id":"m1"}` + "\n" + `{"type":"models","id":"m2","x":1}` + "\n" + `{"type":"models"}` + "\n")
	if code := cli.Run(context.Background(), Spec(), []string{"serve"}, cli.Test(in, &out, &errb, env...)); code != 0 {
		t.Fatalf("serve: exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("serve wrote %d lines, want 3:\n%s", len(lines), out.String())
	}
	var ev protocol.ModelsEvent
	if err := json.Unmarshal([]byte(lines[0]), &ev); err != nil || ev.Type != "models" || ev.ID != "m1" {
		t.Fatalf("reply %q: %+v, %v", lines[0], ev, err)
	}
	var want []protocol.ModelInfo
	dec := json.NewDecoder(&table)
	for dec.More() {
		var m protocol.ModelInfo
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		want = append(want, m)
	}
	if !reflect.DeepEqual(ev.Models, want) {
		t.Fatalf("models in serve: %+v\nwant (pg-llm models --json): %+v", ev.Models, want)
	}
	small := false
	for _, m := range ev.Models {
		small = small || (m.ID == "fake/small" && m.ContextWindow == 6000 && m.Source == "config")
	}
	if !small {
		t.Errorf("the config's model fake/small is missing: %s", lines[0])
	}
	for i, want := range []string{`"id":"m2".*unknown field \\"x\\"`, `"type":"error".*id.*is required`} {
		if !regexp.MustCompile(want).MatchString(lines[i+1]) {
			t.Errorf("line %d: %s, want %s", i+2, lines[i+1], want)
		}
	}
}

// TestServeReadsStdinThroughThePoller: serve reads a stdin pipe through
// a non-blocking descriptor of its own (cli.Pollable), so that waiting
// for the next request parks a goroutine in the runtime's poller, not a
// thread in read(2) that the runtime's monitor then polls every 20 µs.
func TestServeReadsStdinThroughThePoller(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "llm", "anthropic", "tool_use.http"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := bytes.Cut(raw, []byte("\n\n"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	defer srv.Close()
	var fds [2]int // blocking, as a process's stdin is
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "w")
	defer r.Close()
	defer w.Close()
	home := t.TempDir()
	out := &writeLog{}
	var errb bytes.Buffer
	sio := cli.Test(r, out, &errb, serveEnv(home, srv.URL)...)
	done := make(chan int)
	go func() {
		done <- cli.Run(context.Background(), Spec(), []string{"serve", "--model", "anthropic/claude-sonnet-4-5"}, sio)
	}()
	if _, err := w.WriteString(`{"id":"q1","messages":[{"role":"user","content":"weather?"}]}` + "\n"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		out.mu.Lock()
		ended := strings.Contains(strings.Join(out.writes, ""), `"type":"end"`)
		out.mu.Unlock()
		if ended {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no end event: %s", errb.String())
		}
	}
	// serve now waits for the next request: on a descriptor of its own
	// for the pipe, non-blocking.
	pipe, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fds[0]))
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	polled := false
	for _, e := range ents {
		var fd int
		if _, err := fmt.Sscan(e.Name(), &fd); err != nil || fd == fds[0] || fd == fds[1] {
			continue
		}
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == pipe {
			fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
			polled = polled || err == nil && fl&unix.O_NONBLOCK != 0
		}
	}
	if !polled {
		t.Error("serve reads its stdin pipe with a blocking read")
	}
	w.Close()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

// TestServeEndAfterTheIDIsFree: a request's end is written only once its
// recording is done and its id is free again. Here the recording blocks
// (the test holds the session file's lock) while a second request
// starts: its start must not carry the first one's end out with it, and
// once the end is out, reusing its id works.
func TestServeEndAfterTheIDIsFree(t *testing.T) {
	srv := fakeAnthropic(t, "tool_use.http", 0)
	home := t.TempDir()
	recPath := filepath.Join(home, "rec.jsonl")
	lock, err := os.Create(recPath)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	sio := cli.Test(inR, outW, &errb, serveEnv(home, srv.URL)...)
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(context.Background(), Spec(), []string{"serve", "--model", "anthropic/claude-sonnet-4-5", "--concurrency", "2", "--record", recPath}, sio)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	next := func() (typ, id string) {
		if !lines.Scan() {
			t.Fatalf("serve stopped writing: %v; stderr %s", lines.Err(), errb.String())
		}
		var ev struct{ Type, ID string }
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("line %q: %v", lines.Text(), err)
		}
		if ev.Type == "error" {
			t.Fatalf("error event: %s", lines.Text())
		}
		return ev.Type, ev.ID
	}
	send := func(id string) {
		fmt.Fprintf(inW, `{"id":%q,"messages":[{"role":"user","content":"weather?"}]}`+"\n", id)
	}
	send("a")
	next() // a's start
	// a is answered and then waits on its recording; b starts.
	time.Sleep(100 * time.Millisecond)
	send("b")
	for {
		typ, id := next()
		if id == "b" && typ == "start" {
			break
		}
		if typ == "end" {
			t.Fatalf("the end of %s came out before its recording was done", id)
		}
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_UN); err != nil { // the recordings go on
		t.Fatal(err)
	}
	ends := map[string]bool{}
	for len(ends) < 2 {
		if typ, id := next(); typ == "end" {
			ends[id] = true
		}
	}
	send("a") // the id is free again
	for typ, id := next(); typ != "end" || id != "a"; typ, id = next() {
	}
	inW.Close()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

// TestServeRecordFailureEndsTheRequest: when the call cannot be recorded,
// the request ends with an error event instead of its end, as one-shot
// pg-llm fails, never with an end followed by an error.
func TestServeRecordFailureEndsTheRequest(t *testing.T) {
	srv := fakeAnthropic(t, "tool_use.http", 0)
	home := t.TempDir()
	var out, errb bytes.Buffer
	in := strings.NewReader(`{"id":"q1","messages":[{"role":"user","content":"weather?"}]}` + "\n")
	sio := cli.Test(in, &out, &errb, serveEnv(home, srv.URL)...)
	rec := filepath.Join(home, "missing", "rec.jsonl")
	if code := cli.Run(context.Background(), Spec(), []string{"serve", "--model", "anthropic/claude-sonnet-4-5", "--record", rec}, sio); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var types []string
	var last struct {
		Type, ID string
		Message  json.RawMessage // the error's text; the end's is an object
	}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		types = append(types, last.Type)
	}
	if slices.Contains(types, "end") || last.Type != "error" || last.ID != "q1" || !strings.Contains(string(last.Message), "rec.jsonl") {
		t.Fatalf("events %v, last %+v", types, last)
	}
}

// TestServeHoldsOnlyWhatItAnswers: a call that could not be recorded ends
// with an error, so the client never learns the name of its conversation:
// serve does not hold it, and so many such calls do not push out a
// conversation the client can still continue.
func TestServeHoldsOnlyWhatItAnswers(t *testing.T) {
	srv := fakeAnthropic(t, "text.http", 0)
	home := t.TempDir()
	dir := filepath.Join(home, "rec")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	sio := cli.Test(inR, outW, &errb, serveEnv(home, srv.URL)...)
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(context.Background(), Spec(), []string{"serve", "--model", "anthropic/claude-sonnet-4-5", "--record", filepath.Join(dir, "rec.jsonl")}, sio)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	// ask sends a request and returns its last event.
	ask := func(req string) (ev struct{ Type, ID, Held, Kind string }) {
		t.Helper()
		if _, err := io.WriteString(inW, req+"\n"); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() {
			if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type == "end" || ev.Type == "error" {
				return ev
			}
		}
		t.Fatalf("no end: %v %s", lines.Err(), errb.String())
		return ev
	}
	first := ask(`{"id":"r0","messages":[{"role":"user","content":"first question"}]}`)
	if first.Type != "end" || first.Held == "" {
		t.Fatalf("first answer %+v", first)
	}
	if err := os.Rename(dir, dir+".away"); err != nil { // the recordings fail
		t.Fatal(err)
	}
	for i := 1; i <= llm.MaxHeld; i++ {
		if ev := ask(fmt.Sprintf(`{"id":"r%d","messages":[{"role":"user","content":"question %d"}]}`, i, i)); ev.Type != "error" || ev.Held != "" {
			t.Fatalf("a call that could not be recorded: %+v", ev)
		}
	}
	if err := os.Rename(dir+".away", dir); err != nil {
		t.Fatal(err)
	}
	if ev := ask(`{"id":"r99","after":"` + first.Held + `","messages":[{"role":"user","content":"second question"}]}`); ev.Type != "end" {
		t.Fatalf("continuing %s after %d unrecorded calls: %+v", first.Held, llm.MaxHeld, ev)
	}
	inW.Close()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

// fakeAnthropic serves a recorded Anthropic answer (testdata/llm/anthropic)
// to every request, after delay; it is closed when the test ends.
func fakeAnthropic(t *testing.T, file string, delay time.Duration) *llmtest.Server {
	t.Helper()
	rs, err := llmtest.Load(filepath.Join("..", "..", "..", "testdata", "llm", "anthropic", file))
	if err != nil {
		t.Fatal(err)
	}
	rs[0].Delay = delay
	srv := llmtest.NewServer(rs...)
	srv.SetRepeat(true)
	t.Cleanup(srv.Close)
	return srv
}

// serveEnv is the environment of an in-process pg-llm against the
// Anthropic server at url, with home as its HOME and config directory.
func serveEnv(home, url string) []string {
	return []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home, "ANTHROPIC_API_KEY=k", "ANTHROPIC_BASE_URL=" + url}
}
