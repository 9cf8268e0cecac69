package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// Source hands out tasks and records how they ended.
type Source interface {
	// Next returns the next task, or nil when there is none left.
	Next(ctx context.Context) (*protocol.Task, error)
	Complete(ctx context.Context, t *protocol.Task, result json.RawMessage) error
	Fail(ctx context.Context, t *protocol.Task, reason string, retry bool) error
	Release(ctx context.Context, t *protocol.Task) error
	// Renew extends the lease on t; ErrLeaseLost means another worker may
	// have it now.
	Renew(ctx context.Context, t *protocol.Task) error
}

// ErrLeaseLost is a renew, complete or fail refused for a stale token.
var ErrLeaseLost = errors.New("lease lost")

// ListSource serves a fixed list of tasks (--task, --tasks).
type ListSource struct {
	mu    sync.Mutex
	Tasks []protocol.Task
	next  int
}

// Next returns the next pending task of the list.
func (s *ListSource) Next(ctx context.Context) (*protocol.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.next < len(s.Tasks) {
		t := &s.Tasks[s.next]
		s.next++
		if t.Status == protocol.StatusPending || t.Status == protocol.StatusClaimed || t.Status == "" {
			t.Status = protocol.StatusClaimed
			c := *t
			return &c, nil
		}
	}
	return nil, nil
}

func (s *ListSource) set(id, status string, result json.RawMessage, errMsg *string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.Tasks {
		if s.Tasks[i].ID == id {
			s.Tasks[i].Status = status
			s.Tasks[i].Result = result
			s.Tasks[i].Error = errMsg
			s.Tasks[i].UpdatedAt = time.Now().UTC()
		}
	}
}

// Snapshot copies the list with its statuses.
func (s *ListSource) Snapshot() []protocol.Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]protocol.Task(nil), s.Tasks...)
}

// Complete marks the task done.
func (s *ListSource) Complete(_ context.Context, t *protocol.Task, result json.RawMessage) error {
	s.set(t.ID, protocol.StatusDone, result, nil)
	return nil
}

// Fail marks the task failed.
func (s *ListSource) Fail(_ context.Context, t *protocol.Task, reason string, _ bool) error {
	s.set(t.ID, protocol.StatusFailed, nil, &reason)
	return nil
}

// Release puts the task back to pending.
func (s *ListSource) Release(_ context.Context, t *protocol.Task) error {
	s.set(t.ID, protocol.StatusPending, nil, nil)
	return nil
}

// Renew always succeeds: nobody else holds a list.
func (s *ListSource) Renew(context.Context, *protocol.Task) error { return nil }

// TaskInput is one line of --tasks: a task record, of which id, title,
// prompt and verify matter here. A plain JSON string is a prompt.
type TaskInput struct {
	ID          string            `json:"id,omitempty"`
	Title       string            `json:"title,omitempty"`
	Prompt      string            `json:"prompt,omitempty"`
	Verify      string            `json:"verify,omitempty"`
	Priority    int               `json:"priority,omitempty"`
	DependsOn   []string          `json:"depends_on,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Status      string            `json:"status,omitempty"`
	MaxAttempts int               `json:"max_attempts,omitempty"`
}

// ReadTasks reads --tasks JSONL: one task object per line. Errors name the
// line; nothing is run when any line is bad.
func ReadTasks(r io.Reader, name string) ([]protocol.Task, error) {
	dec := jsonl.NewDecoder(r, name).Strict()
	var out []protocol.Task
	seen := map[string]bool{}
	now := time.Now().UTC()
	for {
		var in TaskInput
		err := dec.Decode(&in)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(in.Prompt) == "" && strings.TrimSpace(in.Title) == "" {
			return nil, &jsonl.LineError{Name: name, Line: dec.Line(), Err: errors.New(`a task needs a "prompt" or a "title"`)}
		}
		if in.ID == "" {
			in.ID = fmt.Sprintf("task-%d", len(out)+1)
		}
		if seen[in.ID] {
			return nil, &jsonl.LineError{Name: name, Line: dec.Line(), Err: fmt.Errorf("duplicate task id %q", in.ID)}
		}
		seen[in.ID] = true
		out = append(out, NewTask(in, now))
	}
	return out, nil
}

// NewTask fills a task record from its input.
func NewTask(in TaskInput, now time.Time) protocol.Task {
	if in.Title == "" {
		in.Title = termtext.Cut(termtext.FirstLine(in.Prompt), 80)
	}
	if in.Prompt == "" {
		in.Prompt = in.Title
	}
	if in.Labels == nil {
		in.Labels = map[string]string{}
	}
	if in.DependsOn == nil {
		in.DependsOn = []string{}
	}
	st := in.Status
	if st == "" {
		st = protocol.StatusPending
	}
	return protocol.Task{ID: in.ID, Title: in.Title, Prompt: in.Prompt, Verify: in.Verify, Status: st, Priority: in.Priority,
		DependsOn: in.DependsOn, Labels: in.Labels, MaxAttempts: in.MaxAttempts, CreatedAt: now, UpdatedAt: now}
}

// QueueSource claims tasks from a team queue through the pg-queue CLI, so
// any program with its contract can stand in for it.
type QueueSource struct {
	Cmdline string // e.g. "pg-queue"
	Team    string
	Worker  string
	Lease   time.Duration
	Dir     string
	Env     []string // the command's environment; nil: this process's
	Stderr  io.Writer
}

// QueueError is a pg-queue command that failed.
type QueueError struct {
	Args   []string
	Code   int
	Stderr string
}

func (e *QueueError) Error() string {
	return fmt.Sprintf("queue %s: exit %d: %s", strings.Join(e.Args, " "), e.Code, strings.TrimSpace(e.Stderr))
}

func (s *QueueSource) run(ctx context.Context, args ...string) ([]byte, error) {
	full := append([]string{"--team", s.Team}, args...)
	cmd := shellCommand(ctx, s.Env, s.Cmdline, full...)
	cmd.Dir = s.Dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			qe := &QueueError{Args: args, Code: ee.ExitCode(), Stderr: stderr.String()}
			if strings.Contains(strings.ToLower(qe.Stderr), "lease lost") {
				return nil, fmt.Errorf("%w: %v", ErrLeaseLost, qe)
			}
			return nil, qe
		}
		return nil, fmt.Errorf("run queue command %q: %w", s.Cmdline, err)
	}
	return out, nil
}

// Next claims a task; exit 3 means there is none.
func (s *QueueSource) Next(ctx context.Context) (*protocol.Task, error) {
	return s.claim(ctx, 0)
}

// WaitNext claims a task, waiting up to d for one to become claimable.
func (s *QueueSource) WaitNext(ctx context.Context, d time.Duration) (*protocol.Task, error) {
	return s.claim(ctx, d)
}

// Drained asks `stats` whether any task is left that could still run:
// pending ones that are not stuck behind a failed dependency, or claimed
// ones (by other workers: this one holds none when it asks).
func (s *QueueSource) Drained(ctx context.Context) (bool, string, error) {
	out, err := s.run(ctx, "stats")
	if err != nil {
		return false, "", err
	}
	var st struct {
		Pending int   `json:"pending"`
		Claimed int   `json:"claimed"`
		Blocked int   `json:"blocked"`
		Drained *bool `json:"drained"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &st); err != nil {
		return false, "", fmt.Errorf("queue stats: expected a stats record: %w", err)
	}
	left := fmt.Sprintf("%d pending (%d blocked), %d claimed by other workers", st.Pending, st.Blocked, st.Claimed)
	if st.Drained != nil {
		return *st.Drained, left, nil
	}
	return st.Pending+st.Claimed == 0, left, nil
}

func (s *QueueSource) claim(ctx context.Context, wait time.Duration) (*protocol.Task, error) {
	args := []string{"claim", "--worker", s.Worker, "--lease", s.Lease.String()}
	if wait > 0 {
		args = append(args, "--wait", wait.String())
	}
	out, err := s.run(ctx, args...)
	var qe *QueueError
	if errors.As(err, &qe) && qe.Code == 3 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var t protocol.Task
	if err := json.Unmarshal(bytes.TrimSpace(out), &t); err != nil {
		return nil, fmt.Errorf("queue claim: expected a task record: %w", err)
	}
	if t.ID == "" || t.Claim == nil {
		return nil, errors.New("queue claim: the task record has no id or no claim")
	}
	return &t, nil
}

func token(t *protocol.Task) string {
	if t.Claim == nil {
		return "0"
	}
	return fmt.Sprint(t.Claim.Token)
}

// Complete completes the task with its result.
func (s *QueueSource) Complete(ctx context.Context, t *protocol.Task, result json.RawMessage) error {
	_, err := s.run(ctx, "complete", t.ID, "--token", token(t), "--result", string(result))
	return err
}

// Fail fails the task; retry asks for another attempt.
func (s *QueueSource) Fail(ctx context.Context, t *protocol.Task, reason string, retry bool) error {
	args := []string{"fail", t.ID, "--token", token(t), "--error", reason}
	if retry {
		args = append(args, "--retry")
	}
	_, err := s.run(ctx, args...)
	return err
}

// Release gives the task back.
func (s *QueueSource) Release(ctx context.Context, t *protocol.Task) error {
	_, err := s.run(ctx, "release", t.ID, "--token", token(t))
	return err
}

// Renew extends the lease.
func (s *QueueSource) Renew(ctx context.Context, t *protocol.Task) error {
	_, err := s.run(ctx, "renew", t.ID, "--token", token(t), "--lease", s.Lease.String())
	return err
}
