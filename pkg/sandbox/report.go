package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// Report says what is in force: the mode, whether this machine can enforce
// it, and what enforces each rule. env is the environment commands get.
func (sb *Sandbox) Report(env []string) protocol.SandboxReport {
	planErr := sb.prepare()
	p := sb.policy
	abi, _ := ll.LandlockGetABIVersion()
	r := protocol.SandboxReport{Type: "sandbox", Mode: string(p.Mode), Available: true, Landlock: abi,
		Root: p.Root, TempDir: p.TempDir, AllowNet: p.AllowNet, Env: EnvNames(env)}
	r.Rules = append(r.Rules, protocol.SandboxRule{Rule: "environment: only allow-listed variables and --pass-env", EnforcedBy: "pg-tool"})
	if p.Mode == Off {
		r.Rules = append(r.Rules, protocol.SandboxRule{Rule: "background processes of a bash call end with it when they stay in its process group", EnforcedBy: "process group kill"})
		return r
	}
	var ue *UnavailableError
	switch {
	case errors.As(planErr, &ue):
		r.Available, r.Missing = false, ue.Missing
		return r
	case planErr != nil:
		r.Available, r.Missing = false, []string{planErr.Error()}
		return r
	}
	pl := sb.plan
	r.Landlock = pl.abi
	r.Writable, r.Hidden, r.NotHidden = pl.writable, pl.hidden, pl.notHidden
	lock := fmt.Sprintf("landlock (ABI %d)", pl.abi)
	add := func(rule, by string) { r.Rules = append(r.Rules, protocol.SandboxRule{Rule: rule, EnforcedBy: by}) }
	if p.Mode == ReadOnly {
		add("writes only in the private TMPDIR and --allow-write paths", lock)
	} else {
		add("writes only in the workspace, the private TMPDIR, the sandbox's own build caches and --allow-write paths (the user's build caches are read-only: code planted there would run in the user's later builds)", lock)
	}
	add("reads everywhere but the secret paths: a best-effort list under the home ("+strings.Join(HomeSecrets, ", ")+"), powerglide's config file and data root, and --deny-read; the redaction of outputs is for accidents, not a barrier", lock+": every path around the secret paths is granted, not the secret paths")
	if p.AllowNet {
		add("TCP and UDP allowed (--allow-net)", "none")
	} else {
		tcp := "seccomp (socket families)"
		if pl.abi >= 4 {
			tcp += " and " + lock + " (TCP bind and connect)"
		}
		add("no TCP or UDP to anywhere, loopback included", tcp)
	}
	unix := "seccomp (no unix socket can be created; socketpair makes stream and seqpacket pairs only)"
	if pl.abi >= 6 {
		unix += " and " + lock + " scope (abstract sockets)"
	}
	add("no unix sockets at all, --allow-net or not (Landlock does not check a socket's path)", unix)
	sig := "PID namespace (pg-tool has no PID inside it)"
	if pl.abi >= 6 {
		sig += " and " + lock + " scope (signals)"
	}
	add("no signal to pg-tool or any process outside the sandbox", sig)
	add("no ptrace of pg-tool or any process outside the sandbox", lock+" and PID namespace")
	if os.Geteuid() == 0 {
		add("no privilege regained (setuid programs, capabilities)", "no_new_privs; no capabilities (securebits noroot, empty bounding set) though commands run as uid 0")
	} else {
		add("no privilege regained (setuid programs, capabilities)", "no_new_privs and a user namespace without capabilities (commands show as nobody inside)")
	}
	add("no terminal of the user's: not /dev/pts (the user's other terminals), not the terminal pg-tool runs in; a pg-pty program opens its own and no other", lock+" (/dev/pts is not granted) and no controlling terminal (pg-tool lets go of its own)")
	add("NOT available: a pseudo-terminal of the command's own (script, expect, Python's pty); start such programs with term_start", "none: Landlock checks the new terminal by its path in /dev/pts")
	add("no setuid or setgid bit set on any file, no file given another owner or group", "seccomp (chmod, fchmod, fchmodat and fchmodat2 with S_ISUID or S_ISGID; chown and its kin naming another user or group)")
	add("NOT enforced: other mode bits, timestamps and extended attributes of the user's own files outside the writable paths can still change (chmod 644 ~/.ssh/id_rsa, touch -d, setfacl)", "none: Landlock has no right for chmod, utimes or setxattr")
	add("children inherit the sandbox through exec, setsid and double forks", "landlock, seccomp and no_new_privs are inherited and cannot be dropped")
	add("background processes of a bash call end when the call returns", "PID namespace: the command is its init")
	add("what a terminal program or MCP server leaves running ends with it, even after setsid", "PID namespace: pg-tool sandbox-exec --init is its init")
	add("no descriptor pg-tool inherited (an open file or socket of its caller) reaches a command", "pg-tool (close-on-exec on every inherited descriptor)")
	add("no 32-bit syscalls, no io_uring, no kernel keyring", "seccomp")
	return r
}
