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

// Verifier runs verify commands (--verify, a task's verify, a pipeline
// stage's command check). They build and run the model's code, so they
// belong in the tools' sandbox: Exec is the command line that runs a
// command there ("pg-tool exec", which takes --timeout and the command
// after --); empty, sh runs the command unconfined. Env is the
// environment (nil: this process's); pg-loop gives the tools' one, which
// holds no secrets.
type Verifier struct {
	Exec string
	Env  []string
}

// VerifyOutcome is a verify command's result.
type VerifyOutcome struct {
	OK       bool
	ExitCode int
	Output   string // capped, head and tail kept
}

// verifyOutputCap bounds the output sent back to the model.
const verifyOutputCap = 16 << 10

// execGrace is how long past its timeout pg-loop waits for the sandbox
// runner to end a command itself before killing the runner.
const execGrace = 10 * time.Second

// capOutput keeps the head and the tail of long output.
func capOutput(s string, n int) string {
	if len(s) <= n {
		return s
	}
	half := n / 2
	return s[:half] + fmt.Sprintf("\n[... %d bytes cut ...]\n", len(s)-n) + s[len(s)-half:]
}

// Run runs command with sh -c in dir with a timeout (0: none). A command
// that fails or times out is an outcome, not an error; the error is for a
// command that could not be run at all, or a cancelled ctx.
func (v Verifier) Run(ctx context.Context, command, dir string, timeout time.Duration) (VerifyOutcome, error) {
	limit := timeout
	if v.Exec != "" && limit > 0 {
		limit += execGrace // the runner stops the command itself at timeout
	}
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	var cmd *proc.Child
	if v.Exec != "" {
		cmd = shellCommand(ctx, v.Env, v.Exec, "--timeout", timeout.String(), "--", "sh", "-c", command)
	} else {
		cmd = proc.Command(exec.CommandContext(ctx, "sh", "-c", command))
		cmd.Env = v.Env
		cmd.WaitDelay = 2 * time.Second
	}
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
		return res, fmt.Errorf("run verify %q: %w", strings.TrimSpace(command), err)
	}
	if err != nil && ctx.Err() != nil && ctx.Err() != context.DeadlineExceeded {
		return res, ctx.Err()
	}
	return res, nil
}
