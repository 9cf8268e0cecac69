package pgtool

import (
	"errors"
	"fmt"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/tool"
)

// ExecCmd runs one command in the sandbox, as a bash call runs: pg-loop
// runs its verify command (the model's tests) this way.
//
//	$ pg-tool exec -- go test ./...
//	$ pg-tool exec --timeout 2m -- sh -c 'make test'
type ExecCmd struct {
	Timeout time.Duration `help:"Time limit of the command; it is killed (with every process it started) and pg-tool exits 124 (0: none)." default:"0s" placeholder:"DURATION"`
	Command []string      `arg:"" passthrough:"" help:"Command and arguments."`
}

// Help is the detailed help of the command (--help and the man page).
func (ExecCmd) Help() string {
	return `Runs COMMAND in --root under the sandbox of bash calls (--sandbox, --allow-write, --allow-net, --deny-read, the configuration) with their environment (PATH, HOME, the build-cache variables, --pass-env NAME; no API keys), its output passed through, and exits with its exit code (128+n when signal n ended it). Every process it leaves behind ends with it. pg-loop runs its --verify command and pipeline checks this way.

  $ pg-tool exec -- go test ./...
  $ pg-tool --allow-net exec --timeout 10m -- sh -c 'npm ci && npm test'`
}

// Run runs the command and exits with its code.
func (ec *ExecCmd) Run(rt *cli.Runtime, c *CLI) error {
	argv := ec.Command
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return cli.Usagef("exec: give the command to run, e.g. pg-tool exec -- go test ./...")
	}
	c.NoSkills = true // no tool is called: skills are not looked for
	s, err := c.session(rt, "pg-tool exec", false)
	if err != nil {
		return err
	}
	defer s.Close()
	code, err := s.Exec(rt.Ctx, argv, ec.Timeout, rt.IO.Out, rt.IO.Err)
	switch {
	case errors.Is(err, tool.ErrTimeout):
		return cli.Exit(cli.ExitTimeout, fmt.Errorf("%s timed out after %s", argv[0], ec.Timeout))
	case err != nil && rt.Ctx.Err() != nil:
		return rt.Ctx.Err()
	case err != nil:
		return cli.Failf("exec", "%v", err)
	}
	return cli.Silent(code)
}
