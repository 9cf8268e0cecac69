package monitor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// Queue is what the monitor needs from the team's task queue. The monitor
// drives pg-queue through its command line (CLIQueue), so the queue stays
// swappable and its fencing-token rules hold for every release.
type Queue interface {
	// Claimed lists the claimed tasks.
	Claimed(ctx context.Context) ([]protocol.Task, error)
	// Release gives a claimed task back to the queue. It reports false,
	// without error, when the lease was already lost (the task moved on).
	Release(ctx context.Context, id string, token int64) (bool, error)
	// Stats counts the tasks by status.
	Stats(ctx context.Context) (Stats, error)
}

// Stats are the queue's counts by status (pg-queue stats).
type Stats struct {
	Pending   int `json:"pending"`
	Claimed   int `json:"claimed"`
	Done      int `json:"done"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
	Blocked   int `json:"blocked"`
	// Stuck pending tasks wait on a dependency that failed or was
	// cancelled: they can never run.
	Stuck int `json:"stuck"`
	// DrainedFlag is pg-queue's own verdict, when it gives one.
	DrainedFlag *bool `json:"drained,omitempty"`
}

// Drained reports whether no task is left that could still run: pg-queue's
// verdict when it gives one, else no task pending or claimed.
func (s Stats) Drained() bool {
	if s.DrainedFlag != nil {
		return *s.DrainedFlag
	}
	return s.Pending+s.Claimed == 0
}

// CLIQueue runs `pg-queue --team T ...`.
type CLIQueue struct {
	Argv []string // the command, e.g. ["pg-queue"] or ["/path/to/script"]
	Team string
	Env  []string // environment of the command (POWERGLIDE_HOME, ...)
}

// FindQueueCmd resolves the pg-queue command: cmd when given (split on
// spaces), else the pg-queue binary next to this executable, else pg-queue
// from PATH.
func FindQueueCmd(cmd string) []string {
	if f := strings.Fields(cmd); len(f) > 0 {
		return f
	}
	if exe, err := os.Executable(); err == nil {
		sib := filepath.Join(filepath.Dir(exe), "pg-queue")
		if st, err := os.Stat(sib); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return []string{sib}
		}
	}
	return []string{"pg-queue"}
}

// queueTimeout bounds one pg-queue command: a watch pass holds the
// monitor lock while it runs.
const queueTimeout = 30 * time.Second

func (q *CLIQueue) run(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, queueTimeout)
	defer cancel()
	argv := append(append([]string{}, q.Argv[1:]...), append([]string{"--team", q.Team}, args...)...)
	cmd := exec.CommandContext(ctx, q.Argv[0], argv...)
	cmd.Env = q.Env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.Bytes(), &QueueError{Args: args, Code: ee.ExitCode(), Msg: msg}
		}
		return nil, fmt.Errorf("run %s: %w", q.Argv[0], err)
	}
	return stdout.Bytes(), nil
}

// QueueError is a pg-queue command that exited non-zero.
type QueueError struct {
	Args []string
	Code int
	Msg  string
}

func (e *QueueError) Error() string {
	m := e.Msg
	if m == "" {
		m = "exit status " + strconv.Itoa(e.Code)
	}
	return fmt.Sprintf("pg-queue %s: %s", strings.Join(e.Args, " "), m)
}

// Claimed runs `pg-queue list --status claimed`.
func (q *CLIQueue) Claimed(ctx context.Context) ([]protocol.Task, error) {
	out, err := q.run(ctx, "list", "--status", "claimed")
	if err != nil {
		var qe *QueueError
		if errors.As(err, &qe) && qe.Code == 3 { // nothing to list
			return nil, nil
		}
		return nil, err
	}
	var tasks []protocol.Task
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var t protocol.Task
		if err := json.Unmarshal(line, &t); err != nil {
			return nil, fmt.Errorf("pg-queue list: line %d: %w", n, err)
		}
		if t.Status == protocol.StatusClaimed && t.Claim != nil {
			tasks = append(tasks, t)
		}
	}
	return tasks, sc.Err()
}

// Release runs `pg-queue release ID --token N`. A lost lease (exit 1,
// "lease lost") means the task already moved on: not an error.
func (q *CLIQueue) Release(ctx context.Context, id string, token int64) (bool, error) {
	_, err := q.run(ctx, "release", id, "--token", strconv.FormatInt(token, 10))
	if err != nil {
		var qe *QueueError
		if errors.As(err, &qe) && qe.Code == 1 && strings.Contains(strings.ToLower(qe.Msg), "lease lost") {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// Stats runs `pg-queue stats`.
func (q *CLIQueue) Stats(ctx context.Context) (Stats, error) {
	out, err := q.run(ctx, "stats")
	if err != nil {
		return Stats{}, err
	}
	var s Stats
	if err := json.Unmarshal(bytes.TrimSpace(out), &s); err != nil {
		return Stats{}, fmt.Errorf("pg-queue stats: %w", err)
	}
	return s, nil
}
