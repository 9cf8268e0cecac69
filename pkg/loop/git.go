package loop

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

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
