// Package sandbox confines the commands pg-tool starts for a model: bash,
// external tools, MCP servers and programs in terminal sessions.
//
// The kernel does the enforcing, without root:
//   - Landlock: writes only in the workspace, a private TMPDIR, the
//     sandbox's own build caches and --allow-write paths; reads everywhere except secret paths
//     (an allow-list of everything around them, as Landlock cannot carve a
//     denied path out of an allowed tree); no TCP; no signals or ptrace to
//     processes outside the sandbox.
//   - seccomp: no sockets but netlink (so no UDP, raw or unix sockets; with
//     --allow-net IPv4 and IPv6 too, never unix sockets), no datagram
//     socketpair, no setuid or setgid mode and no owner change (Landlock
//     has no right for chmod or chown), no io_uring (which would bypass
//     the socket filter), no kernel keyring, no 32-bit syscalls.
//   - no_new_privs and no capabilities: no setuid program regains a
//     privilege, and root's commands are root without root's powers.
//   - only the descriptors a command is given: what pg-tool inherited
//     from its caller (an open file, a socket) is close-on-exec, as
//     Landlock checks opens, not descriptors already open;
//   - a PID namespace per command (in a user namespace, unless pg-tool is
//     root and can make one directly): the command is PID 1 of its own
//     namespace, so every process it leaves behind (background jobs, setsid,
//     double forks) is killed when it ends, and it cannot name pg-tool.
//
// Everything is set up on one locked OS thread of the caller, which is then
// the parent of every sandboxed command: a command costs one fork and exec,
// as without the sandbox. Long-lived programs that another program starts
// (pg-pty's terminal programs, MCP servers through the SDK) go through Exec,
// which applies the same rules to the current thread and execs.
//
// A mode the kernel cannot enforce is never weakened: Start fails with an
// *UnavailableError naming what is missing.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/powerglide/powerglide/pkg/proc"
)

// Mode is how much a sandboxed command may do.
type Mode string

// The modes.
const (
	WorkspaceWrite Mode = "workspace-write" // writes in the workspace, TMPDIR and the sandbox's build caches
	ReadOnly       Mode = "read-only"       // writes only in the private TMPDIR
	Off            Mode = "off"             // no sandbox
)

// Modes lists the modes, default first.
var Modes = []Mode{WorkspaceWrite, ReadOnly, Off}

// ParseMode checks a mode's name; "" is the default, workspace-write.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return WorkspaceWrite, nil
	}
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown sandbox mode %q (known: workspace-write, read-only, off)", s)
}

// Policy is what a sandbox allows. It is also what Exec receives, as JSON.
type Policy struct {
	Mode       Mode     `json:"mode"`
	Root       string   `json:"root"`        // the workspace, absolute
	TempDir    string   `json:"tmp"`         // the private TMPDIR; New creates it when empty
	AllowWrite []string `json:"allow_write"` // more writable paths
	AllowNet   bool     `json:"allow_net"`   // TCP and UDP allowed, never unix sockets
	// DenyRead are paths no command may read, besides the built-in secret
	// paths under Home.
	DenyRead []string `json:"deny_read"`
	Home     string   `json:"home"` // the user's home: ~/.ssh and the like
	// AccountHome is the home of the user's passwd entry when it is not
	// Home: its secret paths are denied too.
	AccountHome string   `json:"account_home,omitempty"`
	Config      string   `json:"config"`    // powerglide's config file
	DataRoot    string   `json:"data_root"` // $POWERGLIDE_HOME
	Caches      []string `json:"caches"`    // the sandbox's own build caches, writable (see Caches)
	// CacheEnv are the variables that point the tools at Caches.
	CacheEnv []string `json:"cache_env,omitempty"`
	Disable  []string `json:"disable"` // mechanisms to treat as missing (tests)
	// TTY is the one terminal (/dev/pts/N) commands may open by path:
	// Exec sets it to the controlling terminal it was started on (a pg-pty
	// session's). The user's other terminals stay out of reach.
	TTY string `json:"tty,omitempty"`
}

// Sandbox starts commands under a Policy. Its methods are safe for
// concurrent use.
type Sandbox struct {
	// policy and the fields below it up to mu are set by prepare, under
	// mu; read them after calling prepare.
	policy   Policy
	ownTmp   bool
	plan     *plan // nil when Mode is Off
	planErr  error // why the mode cannot be enforced
	prepared bool

	once   sync.Once
	reqs   chan startReq
	closed chan struct{}
	mu     sync.Mutex
	done   bool
	direct atomic.Bool // the launcher makes PID namespaces without a user namespace
}

type startReq struct {
	cmd        *exec.Cmd
	noTerminal bool // a session of its own if pg-tool keeps its terminal
	done       chan error
}

// New checks the policy. The private TMPDIR and the rules (a walk of the
// tree around the secret paths) are made when first needed, so a pg-tool
// that runs nothing (list, schema) pays for neither. A kernel that cannot
// enforce the mode is not an error here: it is reported by Err, Report and
// every Start.
func New(p Policy) (*Sandbox, error) {
	m, err := ParseMode(string(p.Mode))
	if err != nil {
		return nil, err
	}
	p.Mode = m
	if m != Off && (p.Root == "" || !filepath.IsAbs(p.Root)) {
		return nil, fmt.Errorf("sandbox: the workspace root must be an absolute path, got %q", p.Root)
	}
	return &Sandbox{policy: p, prepared: m == Off, closed: make(chan struct{})}, nil
}

// prepare makes the private TMPDIR and works out the rules, once; it
// returns why commands cannot run (Err).
func (sb *Sandbox) prepare() error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch {
	case sb.prepared:
		return sb.planErr
	case sb.done:
		return errors.New("sandbox: closed")
	}
	sb.prepared = true
	if sb.policy.TempDir == "" {
		dir, err := os.MkdirTemp("", "pg-tool-tmp-")
		if err != nil {
			sb.planErr = fmt.Errorf("sandbox: private temporary directory: %w", err)
			return sb.planErr
		}
		sb.policy.TempDir, sb.ownTmp = dir, true
	}
	sb.plan, sb.planErr = newPlan(sb.policy)
	return sb.planErr
}

// Mode is the mode in force.
func (sb *Sandbox) Mode() Mode { return sb.policy.Mode } // never changes: no prepare

// Policy is the policy, with the private TMPDIR filled in.
func (sb *Sandbox) Policy() Policy {
	_ = sb.prepare()
	return sb.policy
}

// TempDir is the private TMPDIR ("" when the mode is off).
func (sb *Sandbox) TempDir() string {
	_ = sb.prepare()
	return sb.policy.TempDir
}

// Err says why the mode cannot be enforced on this machine (nil when it can).
func (sb *Sandbox) Err() error { return sb.prepare() }

// UnavailableError is the refusal to run a command unconfined.
type UnavailableError struct {
	Mode    Mode
	Missing []string // what the kernel lacks, one phrase each
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("sandbox %s cannot be enforced on this machine: %s; the command was not run (--sandbox off runs commands unconfined)",
		e.Mode, strings.Join(e.Missing, "; "))
}

// Start starts cmd inside the sandbox (plainly when the mode is off). The
// command runs as PID 1 of a new PID namespace: when it ends, everything it
// left running is killed. It has no controlling terminal: /dev/tty is not
// the terminal pg-tool runs in, where the user types (see
// detachTerminal). The command gets its own process group.
func (sb *Sandbox) Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if sb.policy.Mode == Off {
		return cmd.Start()
	}
	return sb.start(cmd, true)
}

// start starts cmd in the sandbox in the session and process group its
// SysProcAttr says: Exec's init stays in the caller's, the terminal's
// foreground group, so that the terminal's signals reach its program.
// noTerminal keeps the command from the controlling terminal.
func (sb *Sandbox) start(cmd *exec.Cmd, noTerminal bool) error {
	if sb.policy.Mode == Off {
		return cmd.Start()
	}
	if err := sb.prepare(); err != nil {
		return err
	}
	// The launcher thread lives as long as the sandbox, so this kills the
	// command only when pg-tool goes away.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	sb.once.Do(sb.startLauncher)
	req := startReq{cmd: cmd, noTerminal: noTerminal, done: make(chan error, 1)}
	select {
	case sb.reqs <- req:
	case <-sb.closed:
		return errors.New("sandbox: closed")
	}
	return <-req.done
}

// Warm makes ready what the first command would otherwise wait for: it
// makes the private TMPDIR and the rules, and starts the launcher thread,
// which puts its restrictions in force in the background (several
// milliseconds, most of a first bash call). A pg-tool that is about to run
// commands (serve, as it starts) calls it, in the background; a
// failure is left for the first Start to report.
func (sb *Sandbox) Warm() {
	if sb.policy.Mode == Off || sb.prepare() != nil {
		return
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if !sb.done {
		sb.once.Do(sb.startLauncher)
	}
}

// startLauncher starts the goroutine that owns the sandboxed thread.
func (sb *Sandbox) startLauncher() {
	sb.reqs = make(chan startReq)
	go func() {
		// Never unlocked: the runtime ends the thread with this goroutine,
		// so its restrictions never reach other goroutines.
		runtime.LockOSThread()
		// Root keeps CAP_SYS_ADMIN on this thread alone, to make each
		// command's PID namespace directly; the commands hold no
		// capability. Anyone else needs a user namespace for it: one
		// without a mapping, so the command keeps the user's kernel
		// identity for file access (it shows as nobody inside). That one
		// costs more, as Go cannot vfork into a new user namespace.
		err := proc.CloseOnExecInherited()
		if err != nil {
			err = fmt.Errorf("sandbox: keep inherited descriptors from commands: %w", err)
		}
		// Commands get no controlling terminal: pg-tool lets go of its
		// own (it reads none), or, when it leads its terminal's session
		// and so cannot, each command gets a session of its own (a
		// setsid costs about half a millisecond more per command). A
		// pg-pty program (Exec) keeps the terminal it leads.
		ownSession := detachTerminal()
		direct, rerr := sb.plan.restrictThread(unix.CAP_SYS_ADMIN)
		if rerr != nil {
			err = &UnavailableError{Mode: sb.policy.Mode, Missing: []string{rerr.Error()}}
		}
		flags := uintptr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID)
		if direct {
			flags = syscall.CLONE_NEWPID
		}
		sb.direct.Store(direct)
		for {
			select {
			case req := <-sb.reqs:
				if err != nil {
					req.done <- err
					continue
				}
				req.cmd.SysProcAttr.Cloneflags |= flags
				if ownSession && req.noTerminal {
					req.cmd.SysProcAttr.Setsid, req.cmd.SysProcAttr.Setpgid = true, false
				}
				req.done <- req.cmd.Start()
			case <-sb.closed:
				return
			}
		}
	}()
}

// Close ends the launcher (killing the commands still running) and removes
// the private TMPDIR.
func (sb *Sandbox) Close() error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.done {
		return nil
	}
	sb.done = true
	close(sb.closed)
	if sb.ownTmp {
		return os.RemoveAll(sb.policy.TempDir)
	}
	return nil
}
