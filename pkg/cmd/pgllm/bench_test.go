package pgllm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/llm"
	"github.com/powerglide/powerglide/pkg/llm/llmtest"
	"github.com/powerglide/powerglide/pkg/protocol"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the benchmarks' binary, once they have run.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// pgllmBinary builds cmd/pg-llm stripped, as `make build` does (without
// -trimpath, which would miss the build cache and recompile everything).
func pgllmBinary(b *testing.B) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pgllm-bench")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "pg-llm")
		cmd := exec.Command("go", "build", "-ldflags", "-s -w", "-o", binPath, "github.com/powerglide/powerglide/cmd/pg-llm")
		cmd.Dir = filepath.Join("..", "..", "..")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return binPath
}

func benchServer(b *testing.B) *llmtest.Server {
	rs, err := llmtest.Load(filepath.Join("..", "..", "..", "testdata", "llm", "anthropic", "text.http"))
	if err != nil {
		b.Fatal(err)
	}
	srv := llmtest.NewServer(rs...)
	srv.SetRepeat(true)
	b.Cleanup(srv.Close)
	return srv
}

func benchEnv(b *testing.B, url string) []string {
	home := b.TempDir()
	return []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home, "PATH=" + os.Getenv("PATH"),
		"ANTHROPIC_API_KEY=sk-ant-bench", "ANTHROPIC_BASE_URL=" + url}
}

// BenchmarkProcessFirstEvent: from starting a pg-llm process to reading
// its first event line, against a local server; also the process's peak
// RSS and CPU time.
func BenchmarkProcessFirstEvent(b *testing.B) {
	bin := pgllmBinary(b)
	srv := benchServer(b)
	env := benchEnv(b, srv.URL)
	var first, cpu time.Duration
	var maxRSS int64
	n := 0
	for b.Loop() {
		cmd := exec.Command(bin, "--model", "anthropic/claude-sonnet-4-5", "hi")
		cmd.Env = env
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		r := bufio.NewReader(out)
		line, err := r.ReadString('\n')
		first += time.Since(t0)
		if err != nil || !strings.HasPrefix(line, `{"type":"start"`) {
			b.Fatalf("first line %q: %v", line, err)
		}
		io.Copy(io.Discard, r)
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		maxRSS = max(maxRSS, ru.Maxrss)
		cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		n++
	}
	b.ReportMetric(float64(first.Microseconds())/1000/float64(n), "ms-to-first-event")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(n), "cpu-ms/process")
	b.ReportMetric(float64(maxRSS)/1024, "peak-RSS-MB")
}

// BenchmarkServeRequest: one request through a warm `pg-llm serve`, from
// writing the request line to reading its end event. Compare with
// BenchmarkInProcessCall (the same call with no process or pipes) for the
// overhead serve adds.
func BenchmarkServeRequest(b *testing.B) {
	bin := pgllmBinary(b)
	srv := benchServer(b)
	cmd := exec.Command(bin, "serve", "--model", "anthropic/claude-sonnet-4-5")
	cmd.Env = benchEnv(b, srv.URL)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	r := bufio.NewReader(out)
	call := func(i int) {
		fmt.Fprintf(in, `{"id":"r%d","messages":[{"role":"user","content":"hi"}]}`+"\n", i)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if strings.HasPrefix(line, `{"type":"end"`) {
				return
			}
			if strings.HasPrefix(line, `{"type":"error"`) {
				b.Fatal(line)
			}
		}
	}
	call(-1) // warm the connection
	i := 0
	for b.Loop() {
		call(i)
		i++
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MB")
}

// BenchmarkInProcessCall is the same call as BenchmarkServeRequest made
// in-process through the router: the baseline for serve's overhead.
func BenchmarkInProcessCall(b *testing.B) {
	srv := benchServer(b)
	r, err := llm.NewRouter(llm.Options{AnthropicKey: "k", AnthropicBaseURL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	req := &protocol.Request{Model: "anthropic/claude-sonnet-4-5", Messages: []protocol.Message{
		{Role: "user", Content: protocol.Content{{Type: "text", Text: "hi"}}}}}
	for b.Loop() {
		if _, err := r.Call(context.Background(), req, func(any) {}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchConversation is a conversation of n messages as an agent loop
// builds it: a prompt, then tool calls and their results in turn.
func benchConversation(n int) []protocol.Message {
	msgs := []protocol.Message{{Role: "user", Content: protocol.Content{{Type: "text", Text: "fix the failing test in pkg/queue"}}}}
	for i := 1; len(msgs) < n; i++ {
		id := fmt.Sprintf("toolu_%04d", i)
		msgs = append(msgs, protocol.Message{Role: "assistant", Content: protocol.Content{
			{Type: "text", Text: "Let me look at the next file."},
			{Type: "tool_call", ID: id, Name: "bash", Input: []byte(fmt.Sprintf(`{"command":"sed -n %d,%dp pkg/queue/queue.go"}`, i*40, i*40+40))}}})
		if len(msgs) < n {
			msgs = append(msgs, protocol.Message{Role: "tool", Content: protocol.Content{{Type: "tool_result", ID: id,
				Output: strings.Repeat(fmt.Sprintf("line %d of the output of a tool call\n", i), 8)}}})
		}
	}
	return msgs
}

// BenchmarkServeConversation is pg-llm serve's own cost for one request
// of a conversation of 10, 100 and 1,000 messages (the CPU time of the
// serve process per request, in ms, against a local server that answers
// at once), with the bytes piped to serve and sent to the provider per
// request: "full" sends the whole conversation every time, "after" names
// the conversation serve holds and sends one new message
// (docs/protocol.md, "Held conversations").
func BenchmarkServeConversation(b *testing.B) {
	bin := pgllmBinary(b)
	srv := benchServer(b)
	srv.SetKeep(false)
	for _, n := range []int{10, 100, 1000} {
		for _, mode := range []string{"full", "after"} {
			b.Run(fmt.Sprintf("msgs=%d/%s", n, mode), func(b *testing.B) {
				cmd := exec.Command(bin, "serve", "--model", "anthropic/claude-sonnet-4-5")
				cmd.Env = benchEnv(b, srv.URL)
				in, _ := cmd.StdinPipe()
				out, _ := cmd.StdoutPipe()
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				r := bufio.NewReader(out)
				conv := benchConversation(n)
				call := func(req *protocol.Request) (int, string) {
					line, err := jsonl.Marshal(req)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := in.Write(line); err != nil {
						b.Fatal(err)
					}
					for {
						l, err := r.ReadString('\n')
						if err != nil {
							b.Fatal(err)
						}
						if strings.HasPrefix(l, `{"type":"end"`) {
							var end protocol.EndEvent
							if err := json.Unmarshal([]byte(l), &end); err != nil {
								b.Fatal(err)
							}
							return len(line), end.Held
						}
						if strings.HasPrefix(l, `{"type":"error"`) {
							b.Fatal(l)
						}
					}
				}
				// The warm-up call opens the connection; in "after" mode it
				// sends all but the last message, which each request adds.
				next := &protocol.Request{ID: "r", Messages: conv}
				if mode == "after" {
					_, held := call(&protocol.Request{ID: "warm", Messages: conv[:n-1]})
					next.After, next.Messages = held, conv[n-1:]
				} else {
					call(&protocol.Request{ID: "warm", Messages: conv})
				}
				sent0 := srv.BytesReceived()
				piped, i := 0, 0
				for b.Loop() {
					next.ID = fmt.Sprintf("r%d", i)
					p, _ := call(next)
					piped += p
					i++
				}
				sent := srv.BytesReceived() - sent0
				in.Close()
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
				// The process's whole CPU time: its start and the warm-up call
				// are spread over the b.N requests (a few percent at most).
				ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
				cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(i), "cpu-ms/req")
				b.ReportMetric(float64(piped)/float64(i), "piped-B/req")
				b.ReportMetric(float64(sent)/float64(i), "sent-B/req")
			})
		}
	}
}
