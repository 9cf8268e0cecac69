package loop

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
)

func ids(ts []protocol.Task) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.ID+":"+t.Status)
	}
	return strings.Join(s, " ")
}

// Tasks added to a session go after its own, none dropped, no id reused.
func TestAppendTasks(t *testing.T) {
	now := time.Now()
	task := func(id, st string) protocol.Task {
		tk := NewTask(TaskInput{ID: id, Prompt: id}, now)
		tk.Status = st
		return tk
	}
	have := []protocol.Task{task("task-1", "done"), task("task-2", "pending"), task("task-3", "pending")}
	got, err := AppendTasks(have, []protocol.Task{task("task-1", "pending"), task("task-2", "pending")}, map[string]bool{"task-7": true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "task-1:done task-2:pending task-3:pending task-8:pending task-9:pending"; ids(got) != want {
		t.Fatalf("got %s, want %s", ids(got), want)
	}
	got, err = AppendTasks(have, []protocol.Task{task("lint", "pending"), task("task-5", "pending"), task("task-3", "pending")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "task-1:done task-2:pending task-3:pending lint:pending task-5:pending task-6:pending"; ids(got) != want {
		t.Fatalf("got %s, want %s", ids(got), want)
	}
	if _, err := AppendTasks(append(have, task("lint", "done")), []protocol.Task{task("lint", "pending")}, nil); err == nil || !strings.Contains(err.Error(), `task id "lint" is already in the session`) {
		t.Fatalf("a taken id of its own: %v", err)
	}
}

// A follow-up continues the last finished task's conversation up to its
// final answer, at run time and when the memory is replayed.
func TestFollowUpReplay(t *testing.T) {
	user := func(s string) protocol.Message {
		return protocol.Message{Role: protocol.RoleUser, Content: protocol.Content{{Type: protocol.BlockText, Text: s}}}
	}
	answer := protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Content{{Type: protocol.BlockText, Text: "did a"}}}
	call := protocol.Message{Role: protocol.RoleAssistant, Content: protocol.Content{{Type: protocol.BlockToolCall, ID: "c1", Name: "sh", Input: []byte(`{}`)}}}
	result := protocol.Message{Role: protocol.RoleTool, Content: protocol.Content{{Type: protocol.BlockToolResult, ID: "c1", Output: "x"}}}
	conv := []protocol.Message{user("a"), call, result, answer, user("check failed"), call, result}
	if got := FollowUpBase(conv); len(got) != 4 || got[3].Content.Text() != "did a" {
		t.Fatalf("base: %d messages", len(got))
	}
	if FollowUpBase(conv[:3]) != nil {
		t.Fatal("a conversation without a final answer has no base")
	}
	var mem strings.Builder
	for _, r := range []MemoryRecord{
		{Type: MemTask, Task: "task-1", Status: "started"},
		{Type: MemMessage, Task: "task-1", Message: &conv[0]},
		{Type: MemMessage, Task: "task-1", Message: &conv[1]},
		{Type: MemMessage, Task: "task-1", Message: &conv[2]},
		{Type: MemMessage, Task: "task-1", Message: &conv[3]},
		{Type: MemTask, Task: "task-1", Status: "done"},
		{Type: MemTask, Task: "task-2", Status: "started", Follows: "task-1"},
		{Type: MemMessage, Task: "task-2", Message: &[]protocol.Message{user("b")}[0]},
	} {
		b, _ := jsonl.Marshal(r)
		mem.Write(b)
	}
	rp, err := ReadMemory(strings.NewReader(mem.String()))
	if err != nil {
		t.Fatal(err)
	}
	if rp.Current == nil || rp.Current.ID != "task-2" || len(rp.Conv) != 5 || rp.Conv[3].Content.Text() != "did a" || rp.Conv[4].Content.Text() != "b" {
		t.Fatalf("replayed follow-up: current %+v, %d messages", rp.Current, len(rp.Conv))
	}
}

// --session-id: a taken id is an ExistsError; a fork copies whole memory
// lines and records its parent; sessions list them.
func TestSessionIDForkAndList(t *testing.T) {
	home := t.TempDir()
	now := time.Now()
	s, err := CreateSessionID(home, "/w", "one", now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ee *ExistsError
	if _, err := CreateSessionID(home, "/w", "one", now); !errors.As(err, &ee) {
		t.Fatalf("a taken id: %v", err)
	}
	if _, err := CreateSessionID(home, "/w", "../x", now); err == nil {
		t.Fatal("a bad id was taken")
	}
	m := protocol.Message{Role: protocol.RoleUser, Content: protocol.Content{{Type: protocol.BlockText, Text: "hi"}}}
	if err := s.Append(MemoryRecord{Type: MemTask, Task: "t", Status: "started"}, MemoryRecord{Type: MemMessage, Task: "t", Message: &m}); err != nil {
		t.Fatal(err)
	}
	s.Info.Tasks = []protocol.Task{{ID: "t", Status: "claimed"}, {ID: "u", Status: "pending"}}
	// A torn last line, as a writer killed mid-write leaves it.
	f, _ := os.OpenFile(filepath.Join(s.Dir, MemoryFile), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"type":"mess`)
	f.Close()
	fork, err := ForkSession(home, s, "", "/w2", now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer fork.Close()
	b, _ := os.ReadFile(filepath.Join(fork.Dir, MemoryFile))
	if strings.Count(string(b), "\n") != 2 || strings.Contains(string(b), `"mess`+"\n") || !strings.HasSuffix(string(b), "\n") {
		t.Fatalf("fork memory:\n%s", b)
	}
	if fork.Info.Parent != "one" || fork.Info.Workdir != "/w2" || len(fork.Info.Tasks) != 2 || fork.Info.ID == "one" {
		t.Fatalf("fork info: %+v", fork.Info)
	}
	if err := s.Save(now); err != nil {
		t.Fatal(err)
	}
	recs, errs := ListSessions(home)
	if len(errs) != 0 || len(recs) != 2 || recs[0].ID != "one" || recs[1].Parent != "one" {
		t.Fatalf("list: %+v %v", recs, errs)
	}
	if recs[0].Tasks["claimed"] != 1 || recs[0].Tasks["pending"] != 1 || recs[0].Cwd != "/w" {
		t.Fatalf("record: %+v", recs[0])
	}
}

// One process drives a session: a second driver is refused with the pid
// of the first; listing does not take the lock; the lock goes with the
// process that held it, even one killed with SIGKILL.
func TestSessionLock(t *testing.T) {
	home := t.TempDir()
	s1, err := CreateSession(home, t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	second := func() error {
		t.Helper()
		s, err := OpenSession(home, s1.Info.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Lock(); err != nil {
			s.Close()
			return err
		}
		t.Cleanup(func() { s.Close() })
		return nil
	}
	var busy *BusyError
	if err := second(); !errors.As(err, &busy) || busy.PID != os.Getpid() || !strings.Contains(err.Error(), fmt.Sprintf("session %s is running as pid %d", s1.Info.ID, os.Getpid())) {
		t.Fatalf("a second driver: %v", err)
	}
	if recs, errs := ListSessions(home); len(recs) != 1 || len(errs) != 0 {
		t.Fatalf("list: %v %v", recs, errs)
	}
	if err := second(); !errors.As(err, &busy) {
		t.Fatalf("listing let the lock go: %v", err)
	}
	// Another process holds it (this test binary, see TestMain), and is
	// killed: the lock goes with it.
	s1.Close()
	holder := exec.Command(os.Args[0])
	holder.Env = append(os.Environ(), "PGLOOP_HOLD_SESSION="+s1.Dir)
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("the holder said %q", line)
	}
	if err := second(); !errors.As(err, &busy) || busy.PID != holder.Process.Pid {
		t.Fatalf("held by pid %d: %v", holder.Process.Pid, err)
	}
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	if err := second(); err != nil {
		t.Fatalf("a lock left by a dead process: %v", err)
	}
}
