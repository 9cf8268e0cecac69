package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// BenchmarkLoopSteps measures the loop's overhead per step: one model
// round-trip and one tool round-trip through real coprocesses (zero-latency
// fakes speaking the pg-llm serve and pg-tool serve protocols), the events,
// the session memory and the window check. One op is one 200-step task.
func BenchmarkLoopSteps(b *testing.B) {
	const steps = 200
	llm := NewServeLLM(fakeCmd(b, fmt.Sprint("llm ", steps)), os.Stderr)
	tools := NewServeTools(fakeCmd(b, "tools"), fakeCmd(b, "list"), "", nil, os.Stderr)
	defer llm.Close()
	defer tools.Close()
	home := b.TempDir()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		sess, err := CreateSession(home, home, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		r, _ := NewRunner(Options{Workdir: home, LLM: llm, Tools: tools, MaxTokens: 1000, MaxSteps: steps + 1, ContextWindow: 200000,
			Source: &ListSource{Tasks: []protocol.Task{NewTask(TaskInput{ID: "t", Prompt: "go"}, time.Now())}}, Events: NewEmitter(io.Discard, false), Session: sess})
		res := r.Run(context.Background())
		sess.Close()
		if res.State != Done || res.TasksDone != 1 {
			b.Fatalf("%+v", res)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N*(steps+1))/1000, "ms/step")
}

// BenchmarkResume10k measures reading back a session of 10,000 messages
// (5,000 tool calls with their results, ~200 bytes of output each).
func BenchmarkResume10k(b *testing.B) {
	home := b.TempDir()
	sess, err := CreateSession(home, home, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	writeMemory(b, sess, 10000)
	sess.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := OpenSession(home, sess.Info.ID)
		if err != nil {
			b.Fatal(err)
		}
		rp, err := s.LoadReplay()
		if err != nil || len(rp.Conv) != 10001 {
			b.Fatalf("%v %d", err, len(rp.Conv))
		}
		s.Close()
	}
}

// writeMemory fills a session with a task of n messages after the prompt.
func writeMemory(tb testing.TB, s *Session, n int) {
	t := NewTask(TaskInput{ID: "task-1", Prompt: "resume me"}, time.Now())
	recs := []MemoryRecord{{Type: MemTask, Task: t.ID, Status: "started", TaskRec: &t},
		{Type: MemMessage, Task: t.ID, Message: &protocol.Message{Role: "user", Content: protocol.Content{{Type: "text", Text: "resume me"}}}}}
	out := strings.Repeat("output line of a tool\n", 9)
	u := protocol.Usage{InputTokens: 100, OutputTokens: 10}
	for i := 0; i < n; i += 2 {
		id := fmt.Sprintf("c%d", i)
		recs = append(recs,
			MemoryRecord{Type: MemMessage, Task: t.ID, Usage: &u, Message: &protocol.Message{Role: "assistant", Content: protocol.Content{{Type: "tool_call", ID: id, Name: "bash", Input: json.RawMessage(fmt.Sprintf(`{"command":"echo %d"}`, i))}}}},
			MemoryRecord{Type: MemMessage, Task: t.ID, Message: &protocol.Message{Role: "tool", Content: protocol.Content{{Type: "tool_result", ID: id, Output: out}}}})
		if len(recs) > 1000 {
			if err := s.Append(recs...); err != nil {
				tb.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	if err := s.Append(recs...); err != nil {
		tb.Fatal(err)
	}
	s.Info.Tasks = []protocol.Task{t}
	if err := s.Save(time.Now()); err != nil {
		tb.Fatal(err)
	}
}

// TestResumeLargeSession checks that a 10,000-message session resumes into
// a run that finishes its task (the timing is a benchmark's business).
func TestResumeLargeSession(t *testing.T) {
	home := t.TempDir()
	sess, _ := CreateSession(home, home, time.Now())
	writeMemory(t, sess, 10000)
	sess.Close()
	s, err := OpenSession(home, sess.Info.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Lock(); err != nil { // as pg-loop does, before it reads the memory
		t.Fatal(err)
	}
	rp, err := s.LoadReplay()
	if err != nil {
		t.Fatal(err)
	}
	llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}
	var out bytes.Buffer
	r, _ := NewRunner(Options{Workdir: home, LLM: llm, Tools: okTool(""), MaxTokens: 1000, Source: &ListSource{Tasks: s.Info.Tasks},
		Events: NewEmitter(&out, false), Session: s, Resume: rp})
	if res := r.Run(context.Background()); res.State != Done || res.TasksDone != 1 {
		t.Fatalf("%+v", res)
	}
	if n := len(llm.reqs[0].Messages); n != 10001 {
		t.Errorf("resumed request has %d messages", n)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, MemoryFile)); err != nil {
		t.Fatal(err)
	}
}
