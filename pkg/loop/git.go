package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/proc"
)

// VerifyOutcome is a verify command's result.
type VerifyOutcome struct {
	OK       bool
	ExitCode int
	Output   string // capped, head and tail kept
}

// verifyOutputCap bounds the output sent back to the model.
const verifyOutputCap = 16 << 10

// capOutput keeps the head and the tail of long output.
func capOutput(s string, n int) string {
	if len(s) <= n {
		return s
	}
	half := n / 2
	return s[:half] + fmt.Sprintf("\n[... %d bytes cut ...]\n", len(s)-n) + s[len(s)-half:]
}

// RunVerify runs a shell command in dir with a timeout.
func RunVerify(ctx context.Context, command, dir string, timeout time.Duration) (VerifyOutcome, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := proc.Command(exec.CommandContext(ctx, "sh", "-c", command))
	cmd.WaitDelay = 2 * time.Second
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	res := VerifyOutcome{Output: capOutput(out.String(), verifyOutputCap)}
	var ee *exec.ExitError
	switch {
	case err == nil:
		res.OK = true
	case ctx.Err() == context.DeadlineExceeded:
		res.ExitCode = 124
		res.Output += fmt.Sprintf("\n[verify timed out after %s]", timeout)
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
		if res.ExitCode < 0 {
			res.ExitCode = 128 // killed
		}
	default:
		return res, fmt.Errorf("run verify %q: %w", command, err)
	}
	if err != nil && ctx.Err() != nil && ctx.Err() != context.DeadlineExceeded {
		return res, ctx.Err()
	}
	return res, nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	return gitIn(ctx, dir, "", args...)
}

func gitIn(ctx context.Context, dir, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}

// CommitMessage makes a commit message from the model's final summary:
// the first non-empty line as subject (capped), the rest as body. The
// promise tag is dropped.
func CommitMessage(summary, fallback string) string {
	summary = promiseRE().ReplaceAllString(summary, "")
	lines := strings.Split(strings.TrimSpace(summary), "\n")
	subject := ""
	var body []string
	for i, l := range lines {
		l = strings.TrimSpace(strings.TrimLeft(l, "#*- "))
		if l == "" {
			continue
		}
		subject = l
		body = lines[i+1:]
		break
	}
	if subject == "" {
		subject = fallback
	}
	if len(subject) > 72 {
		cut := strings.LastIndexByte(subject[:72], ' ')
		if cut < 40 {
			cut = 72
		}
		subject = subject[:cut]
	}
	msg := subject
	if b := strings.TrimSpace(strings.Join(body, "\n")); b != "" {
		msg += "\n\n" + b
	}
	return msg + "\n"
}

// GitCommit commits every change in dir's work tree. It returns an empty
// hash when nothing changed.
func GitCommit(ctx context.Context, dir, message string) (string, error) {
	if _, err := git(ctx, dir, "add", "-A"); err != nil {
		return "", err
	}
	st, err := git(ctx, dir, "status", "--porcelain")
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(st) == "" {
		return "", nil
	}
	args := []string{"commit", "-q", "--no-verify", "-F", "-"}
	if _, err := git(ctx, dir, "config", "user.email"); err != nil {
		// No identity configured: commit as pg-loop rather than fail.
		args = append([]string{"-c", "user.name=pg-loop", "-c", "user.email=pg-loop@localhost"}, args...)
	}
	if _, err := gitIn(ctx, dir, message, args...); err != nil {
		return "", err
	}
	out, err := git(ctx, dir, "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}
