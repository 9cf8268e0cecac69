package pgtool

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/config"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/sandbox"
)

// sandbox builds the sandbox of the session from the flags and the
// configuration.
func (c *CLI) sandbox(rt *cli.Runtime, cfg *config.Config) (*sandbox.Sandbox, error) {
	mode, err := sandbox.ParseMode(cfg.String("sandbox"))
	if err != nil {
		return nil, cli.Usagef("%v", err)
	}
	root := c.Root
	if root == "" {
		root = "."
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			root = r
		}
	}
	home, account := c.homes(rt)
	if home == "" && mode != sandbox.Off {
		return nil, cli.Usagef("sandbox: cannot find the home directory (HOME is unset or relative, and the passwd entry names none), so its secret paths (~/.ssh and the like) could not be hidden; set HOME, or use --sandbox off")
	}
	abs := func(paths []string) ([]string, error) {
		var out []string
		for _, p := range paths {
			if strings.HasPrefix(p, "~/") {
				p = filepath.Join(home, p[2:])
			}
			a, err := filepath.Abs(p)
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		return out, nil
	}
	allowWrite, err := abs(c.AllowWrite)
	if err != nil {
		return nil, cli.Usagef("--allow-write: %v", err)
	}
	denyRead, err := abs(c.DenyRead)
	if err != nil {
		return nil, cli.Usagef("--deny-read: %v", err)
	}
	p := sandbox.Policy{
		Mode:        mode,
		Root:        root,
		AllowWrite:  allowWrite,
		AllowNet:    c.AllowNet,
		DenyRead:    denyRead,
		Home:        home,
		AccountHome: account,
		Config:      cfg.File,
		DataRoot:    cfg.String("home"),
		Disable:     c.hooks.SandboxMissing,
	}
	if mode == sandbox.WorkspaceWrite {
		dir := cfg.String("sandbox_cache")
		if dir == "" {
			dir = filepath.Join(p.DataRoot, "cache", "sandbox")
		}
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, cli.Usagef("sandbox_cache: %v", err)
		}
		if p.Caches, p.CacheEnv, err = sandbox.Caches(rt.IO.Getenv, home, dir); err != nil {
			return nil, cli.Failf("sandbox", "%v", err)
		}
	}
	sb, err := sandbox.New(p)
	if err != nil {
		return nil, cli.Usagef("%v", err)
	}
	return sb, nil
}

// homes finds the user's home: $HOME when it is an absolute path, else
// the home of the user's passwd entry. account is the passwd entry's home
// when it differs: any program finds it (getpwuid), so its secrets are
// denied too.
func (c *CLI) homes(rt *cli.Runtime) (home, account string) {
	if h := rt.IO.Getenv("HOME"); filepath.IsAbs(h) {
		home = filepath.Clean(h)
	}
	lookup := c.hooks.Account
	if lookup == nil {
		lookup = user.Current
	}
	if u, err := lookup(); err == nil && filepath.IsAbs(u.HomeDir) {
		account = filepath.Clean(u.HomeDir)
	}
	switch {
	case home == "":
		return account, ""
	case account == home:
		return home, ""
	}
	return home, account
}

// helperBinary is pg-tool's own binary, which the sandbox runs as
// "pg-tool sandbox-exec" for programs other programs start. Under a test
// harness that runs pg-tool inside a test binary, it is the pg-tool on PATH.
func helperBinary() string {
	exe, err := os.Executable()
	if err == nil && filepath.Base(exe) == "pg-tool" {
		return exe
	}
	if p, err := exec.LookPath("pg-tool"); err == nil {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
	}
	return ""
}

// SandboxCmd prints what the sandbox enforces.
//
//	$ pg-tool sandbox | jq '.rules[]'
//	$ pg-tool --sandbox read-only sandbox
type SandboxCmd struct{}

// Run prints the report; it exits 1 when the mode cannot be enforced.
func (sc *SandboxCmd) Run(rt *cli.Runtime, c *CLI) error {
	s, err := c.session(rt, "pg-tool sandbox", false)
	if err != nil {
		return err
	}
	defer s.Close()
	r := s.SandboxReport()
	if err := printValue(rt, r); err != nil {
		return err
	}
	if !r.Available {
		return cli.Failf("sandbox", "sandbox %s cannot be enforced on this machine: %s (--sandbox off runs commands unconfined)", r.Mode, strings.Join(r.Missing, "; "))
	}
	return nil
}

// Help is the detailed help of the command (--help and the man page).
func (SandboxCmd) Help() string {
	return `Prints one JSON record {type:"sandbox", mode, available, missing, landlock_abi, root, tmp, writable, hidden, not_hidden, allow_net, env, rules:[{rule, enforced_by}]}. Exit 1 when this machine cannot enforce the mode (sandboxed commands are then refused).

  $ pg-tool sandbox | jq -r '.rules[] | "\(.rule): \(.enforced_by)"'
  $ pg-tool --sandbox read-only --deny-read ~/secrets sandbox`
}

// SandboxExecCmd runs a command in the sandbox: the way programs that
// pg-pty or the MCP SDK start enter it (sandbox.Exec), and, with --init,
// the init of such a program's PID namespace (sandbox.Init).
type SandboxExecCmd struct {
	Policy  string   `help:"The policy as JSON."`
	Init    string   `name:"init" help:"Be the init of the program's PID namespace and run the program at PATH (sandbox-exec starts it so)." placeholder:"PATH"`
	Command []string `arg:"" passthrough:"" help:"Command and arguments."`
}

// Run runs the command and exits as it did: with its code, or by its signal.
func (se *SandboxExecCmd) Run(rt *cli.Runtime) error {
	argv := se.Command
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	var ws syscall.WaitStatus
	var err error
	switch {
	case se.Init != "":
		ws, err = sandbox.Init(se.Init, argv, rt.IO.Env)
	case se.Policy == "":
		return cli.Usagef("sandbox-exec needs --policy")
	default:
		ws, err = sandbox.Exec(se.Policy, helperBinary(), argv, rt.IO.Env)
	}
	if err != nil {
		return cli.Failf("sandbox", "%v", err)
	}
	return exitAs(ws)
}

// Init runs "pg-tool sandbox-exec --init=PATH -- ARGV" without parsing a
// command line: every terminal program and MCP server starts one, and
// skipping kong brings it up sooner. ok is false for other command lines.
func Init(args, env []string, errw io.Writer) (code int, ok bool) {
	if len(args) < 4 || args[0] != sandbox.ExecCommand || args[2] != "--" {
		return 0, false
	}
	path, ok := strings.CutPrefix(args[1], sandbox.InitFlag+"=")
	if !ok {
		return 0, false
	}
	ws, err := sandbox.Init(path, args[3:], env)
	if err != nil {
		fmt.Fprintf(errw, "pg-tool: error: %v\n", err)
		return cli.ExitFailure, true
	}
	return cli.ExitCode(exitAs(ws)), true
}

// exitAs ends the process as the program ended: by its signal (an init
// cannot: it exits 128+n, and its status reached Exec by the pipe anyway),
// else with its code.
func exitAs(ws syscall.WaitStatus) error {
	if ws.Signaled() {
		proc.Raise(ws.Signal())
		return cli.Silent(128 + int(ws.Signal()))
	}
	if code := ws.ExitStatus(); code != 0 {
		return cli.Silent(code)
	}
	return nil
}
