package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// takenOver is a source whose lease was taken over while the task ran:
// every renewal says so. It counts what the worker asks of it.
type takenOver struct {
	ListSource
	mu                         sync.Mutex
	renews, completes, failing int
}

func (s *takenOver) Renew(context.Context, *protocol.Task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renews++
	return fmt.Errorf("%w: token 1 is not the current claim, worker 2 holds it with token 2", ErrLeaseLost)
}

func (s *takenOver) Complete(context.Context, *protocol.Task, json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.completes++
	return nil
}

func (s *takenOver) Fail(context.Context, *protocol.Task, string, bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing++
	return nil
}

// A worker whose lease was lost reaches commit with work done in its tree:
// it checks the lease right before committing and commits nothing, neither
// in git nor in the queue, and says so in its events.
func TestLeaseLostBeforeCommitCommitsNothing(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("this test needs git: %v", err)
	}
	h := newHarness(t, &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("did it")}}, okTool("x"))
	if out, err := exec.Command("git", "init", "-q", h.opts.Workdir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(h.opts.Workdir, "work.txt"), []byte("work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	task := NewTask(TaskInput{ID: "t1", Prompt: "p"}, time.Now())
	task.Claim = &protocol.Claim{Worker: "1", Token: 1}
	src := &takenOver{ListSource: ListSource{Tasks: []protocol.Task{task}}}
	repo, err := OpenRepo(context.Background(), h.opts.Workdir, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.opts.Source, h.opts.Commit, h.opts.Repo = src, true, repo
	h.run(t)
	if src.renews != 1 || src.completes != 0 || src.failing != 0 {
		t.Errorf("renews %d, completes %d, fails %d; want 1, 0, 0", src.renews, src.completes, src.failing)
	}
	if out, err := exec.Command("git", "-C", h.opts.Workdir, "rev-parse", "--verify", "-q", "HEAD").CombinedOutput(); err == nil {
		t.Errorf("a commit was made: %s", out)
	}
	out := h.out.String()
	for _, want := range []string{
		`"level":"warn","message":"task t1: lease lost before commit (token 1): nothing committed`,
		`"status":"failed","reason":"lease lost before commit: nothing committed; another worker may hold the task"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("events lack %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"type":"commit"`) {
		t.Errorf("a commit event:\n%s", out)
	}
}
