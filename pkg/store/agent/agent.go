// Package agent keeps one store agent per host and store, ssh
// ControlPersist style: a long-lived `pg-queue agent` holds a small pool
// of PostgreSQL connections with prepared statements and serves the team
// store (pkg/store/remote) on a Unix socket under the data root, so that a
// short pg-queue command pays a local round trip instead of a server
// backend's fork and a cold catalog cache (docs/store-agent.md).
//
// The socket is $POWERGLIDE_HOME/run/store-<hash>.sock, the hash over the
// store URL and the PG* variables that complete it, the agent program's
// build and the host: a host's commands reach only the agent of their own
// data root, store and pg-queue binary. The run directory
// is 0700 and the socket 0600; a client refuses either when it is owned by
// another user or open to others, and the agent refuses peers of another
// user.
//
// The first command that finds no agent starts one (Open) under a flock
// next to the socket, and waits for it to say it listens on a pipe. The
// agent exits after an idle period with no client, or when its socket is
// removed or replaced (the data root deleted, another agent started).
package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// RunDir is the directory of the agents' sockets, locks and logs under
// the data root.
func RunDir(home string) string { return filepath.Join(home, "run") }

// Key names the agent of a store URL: a short hash over the URL, the PG*
// variables of environ (which fill what the URL leaves out), the wire
// protocol's version, the build of the agent's program exe (Build) and
// this host (Host).
func Key(url string, environ []string, exe string) string {
	var pg []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, "PG") {
			pg = append(pg, kv)
		}
	}
	slices.Sort(pg)
	h := sha256.New()
	fmt.Fprintf(h, "v%d\x00%s\x00%s\x00%s\x00%s", protocol.StoreAgentProtocol, url, strings.Join(pg, "\x00"), Build(exe), Host())
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Build identifies the program file exe: its device, inode, size and
// modification time. A pg-queue replaced by an upgrade (a new file, or the
// same one rewritten) gets a key of its own, and so an agent of its own,
// instead of talking to the agent of the binary it replaced, which exits
// when idle.
func Build(exe string) string {
	fi, err := os.Stat(exe)
	if err != nil {
		return "?"
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("%d:%d", fi.Size(), fi.ModTime().UnixNano())
	}
	return fmt.Sprintf("%d:%d:%d:%d", st.Dev, st.Ino, fi.Size(), fi.ModTime().UnixNano())
}

// Host identifies this host: its name, its running kernel (the boot id)
// and its network namespace. A data root shared between machines (an NFS
// home) or between network namespaces gives each its own agent, instead of
// one socket path that the agents of all of them keep replacing. The name
// alone is not enough: cloned machines share it, and the first network
// namespace has the same number on every Linux; the boot id is random at
// every boot of every kernel.
var Host = sync.OnceValue(func() string {
	name, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/net")
	return hostKey(name, string(boot), ns)
})

// hostKey is Host's value for a host named name, whose kernel has boot id
// boot, in network namespace ns.
func hostKey(name, boot, ns string) string {
	return name + "\x00" + strings.TrimSpace(boot) + "\x00" + ns
}

// SocketPath is the socket of the agent of url, run from the program
// exe, under home.
func SocketPath(home, url string, environ []string, exe string) string {
	return filepath.Join(RunDir(home), "store-"+Key(url, environ, exe)+".sock")
}

// ensureRunDir makes the run directory (0700) and checks it is private.
func ensureRunDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return checkPrivate(dir, true)
}

// checkPrivate refuses a file (the run directory, a socket) that another
// user owns or that others may use.
func checkPrivate(path string, dir bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner", path)
	}
	if int(st.Uid) != os.Getuid() {
		return &RefusedError{Path: path, Why: fmt.Sprintf("owned by uid %d, not %d", st.Uid, os.Getuid())}
	}
	switch {
	case dir && !fi.IsDir():
		return &RefusedError{Path: path, Why: "not a directory"}
	case !dir && fi.Mode().Type() != os.ModeSocket:
		return &RefusedError{Path: path, Why: "not a socket", Replace: true}
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return &RefusedError{Path: path, Why: fmt.Sprintf("mode %04o lets other users in (want 0700 or 0600)", fi.Mode().Perm())}
	}
	return nil
}

// RefusedError is a run directory or socket that is not private.
type RefusedError struct {
	Path string
	Why  string
	// Replace: the user's own file at the socket's name is no socket (a
	// stray `: > store-<k>.sock`); Open replaces it with an agent's.
	Replace bool
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("store agent: refusing %s: %s", e.Path, e.Why)
}

// ErrRefused is what errors.Is finds in a RefusedError.
var ErrRefused = errors.New("store agent: refused")

func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// WarnRefused writes one line to w, once per process, when err (from Open
// or OpenRemote) says that the run directory or the socket was refused for
// its owner or mode: else every command would connect directly, forever,
// without a word of why the agent never helps.
func WarnRefused(w io.Writer, tool string, err error) {
	if !refused(err) {
		return
	}
	warnRefused.Do(func() {
		fmt.Fprintf(w, "%s: warning: %v; connecting to the store directly, without the agent\n", tool, err)
	})
}

var warnRefused sync.Once

// refused tells whether err keeps the agent off: a refusal, other than a
// non-socket of the user's own at the socket's name.
func refused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r) && !r.Replace
}

// replaceable tells whether err is a non-socket of the user's own at the
// socket's name, which a new agent's socket replaces.
func replaceable(err error) bool {
	var r *RefusedError
	return errors.As(err, &r) && r.Replace
}
