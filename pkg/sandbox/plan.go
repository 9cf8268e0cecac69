package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Landlock access rights, grouped as the sandbox grants them.
const (
	accessRead = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	// accessAll is everything Landlock ABI 3 can deny: reading, writing,
	// creating, removing, renaming across directories and truncating.
	accessAll  = landlock.AccessFSSet(1<<15 - 1)
	accessFile = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	accessDev  = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
)

// minABI is the Landlock ABI the sandbox needs: 3 is the first that denies
// truncating a file outside the writable paths.
const minABI = 3

// plan is a policy worked out for this machine: the Landlock rules, the
// seccomp filter and what enforces each promise.
type plan struct {
	policy    Policy
	abi       int
	cfg       landlock.Config
	rules     []landlock.Rule
	readable  []string // paths given whole read access around the secrets
	writable  []string // paths given write access
	hidden    []string // secret paths that exist and are denied
	notHidden []string // secret paths inside a writable path: Landlock cannot deny them
	filter    []unix.SockFilter
}

// newPlan works out the rules; it fails with an *UnavailableError when the
// kernel lacks a mechanism.
func newPlan(p Policy) (*plan, error) {
	pl := &plan{policy: p}
	var missing []string
	disabled := func(m string) bool { return slices.Contains(p.Disable, m) }

	pl.abi, _ = ll.LandlockGetABIVersion()
	if disabled("landlock") {
		pl.abi = 0
	}
	switch {
	case pl.abi == 0:
		missing = append(missing, "landlock is not available (kernel without CONFIG_SECURITY_LANDLOCK, or not in the lsm= list)")
	case pl.abi < minABI:
		missing = append(missing, fmt.Sprintf("landlock ABI %d or later is needed, the kernel has ABI %d", minABI, pl.abi))
	}
	if disabled("seccomp") || !seccompAvailable() {
		missing = append(missing, "seccomp filters are not available")
	}
	if disabled("userns") {
		missing = append(missing, "unprivileged user namespaces are not available")
	}
	var err error
	if pl.filter, err = seccompFilter(p.AllowNet, uint32(os.Geteuid()), uint32(os.Getegid())); err != nil {
		missing = append(missing, err.Error())
	}
	if len(missing) > 0 {
		return pl, &UnavailableError{Mode: p.Mode, Missing: missing}
	}

	pl.cfg = landlock.Config{HandledAccessFS: accessAll}
	if pl.abi >= 4 && !p.AllowNet {
		pl.cfg.HandledAccessNet = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
	}
	if pl.abi >= 6 { // no unix socket even with --allow-net
		pl.cfg.Scoped = ll.ScopeSignal | ll.ScopeAbstractUnixSocket
	}

	pl.writable = writablePaths(p)
	denied := secretPaths(p)
	for _, d := range denied {
		if under(d, pl.writable) {
			pl.notHidden = append(pl.notHidden, d)
		} else if _, err := os.Lstat(d); err == nil {
			pl.hidden = append(pl.hidden, d)
		}
	}
	// The user's terminals are not read either (a reader wins a share of
	// the keys typed there), only the one the policy names.
	var dirsOnly []string
	pl.readable, dirsOnly = readablePaths(append(slices.Clone(denied), "/dev/pts"))

	add := func(access landlock.AccessFSSet, paths []string) {
		var dirs, files []string
		for _, path := range paths {
			fi, err := os.Stat(path)
			switch {
			case err != nil:
				continue // vanished, or a dangling link: nothing to grant
			case fi.IsDir():
				dirs = append(dirs, path)
			default:
				files = append(files, path)
			}
		}
		if len(dirs) > 0 {
			pl.rules = append(pl.rules, landlock.PathAccess(access, dirs...).IgnoreIfMissing())
		}
		if fa := access & accessFile; len(files) > 0 && fa != 0 {
			pl.rules = append(pl.rules, landlock.PathAccess(fa, files...).IgnoreIfMissing())
		}
	}
	add(accessRead, pl.readable)
	add(ll.AccessFSReadDir, dirsOnly)
	add(accessAll, pl.writable)
	// Devices: the null ones, the command's own controlling terminal
	// (/dev/tty) and new pseudo-terminals of its own (/dev/ptmx, whose
	// other end programs reach through TIOCGPTPEER, as glibc's openpty
	// does); never /dev/pts, where every terminal of the user is.
	add(accessDev, []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx"})
	if p.TTY != "" && within(p.TTY, "/dev/pts") {
		add(accessDev, []string{p.TTY})
	}
	return pl, nil
}

// HomeSecrets are the places in a home where credentials usually are:
// keys, tokens, password stores, browser profiles (cookies) and shell
// histories (where an exported key is typed). A best-effort list: a
// secret kept elsewhere needs --deny-read.
var HomeSecrets = []string{
	".ssh", ".gnupg", ".netrc", ".password-store", ".local/share/keyrings",
	".aws", ".azure", ".config/gcloud", ".kube", ".docker/config.json",
	".git-credentials", ".config/git/credentials", ".config/gh",
	".npmrc", ".pypirc", ".cargo/credentials.toml", ".cargo/credentials", ".pgpass",
	".bash_history", ".zsh_history", ".python_history", ".psql_history",
	".mozilla", ".config/google-chrome", ".config/chromium",
}

// secretPaths are the paths no command may read: the user's keys (under
// both homes), powerglide's config and data and --deny-read, each also as
// the target of its symlinks. One inside a writable path cannot be hidden:
// newPlan reports it as not hidden (a data root inside the workspace, say).
func secretPaths(p Policy) []string {
	var out []string
	for _, home := range []string{p.Home, p.AccountHome} {
		if home == "" {
			continue
		}
		for _, rel := range HomeSecrets {
			out = append(out, filepath.Join(home, rel))
		}
	}
	if p.Config != "" {
		out = append(out, p.Config)
	}
	if p.DataRoot != "" {
		out = append(out, p.DataRoot)
	}
	out = append(out, p.DenyRead...)
	var all []string
	for _, d := range out {
		d = filepath.Clean(d)
		all = append(all, d)
		if r, err := filepath.EvalSymlinks(d); err == nil && r != d {
			all = append(all, r)
		}
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// writablePaths are the paths a command may change.
func writablePaths(p Policy) []string {
	out := []string{p.TempDir}
	if p.Mode == WorkspaceWrite {
		out = append(out, p.Root)
		out = append(out, p.Caches...)
	}
	out = append(out, p.AllowWrite...)
	var abs []string
	for _, w := range out {
		if w == "" {
			continue
		}
		abs = append(abs, filepath.Clean(w))
		if r, err := filepath.EvalSymlinks(w); err == nil && r != filepath.Clean(w) {
			abs = append(abs, r)
		}
	}
	slices.Sort(abs)
	return slices.Compact(abs)
}

// readablePaths covers the whole tree but the denied paths. Landlock only
// grants, so each directory above a denied path gets listing rights alone
// (dirsOnly) and each of its other entries gets read rights whole (read).
// An entry created there later is not readable until the next session.
func readablePaths(denied []string) (read, dirsOnly []string) {
	if len(denied) == 0 {
		return []string{"/"}, nil
	}
	var walk func(dir string)
	walk = func(dir string) {
		dirsOnly = append(dirsOnly, dir)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			switch {
			case under(p, denied):
				// hidden
			case above(p, denied):
				if e.IsDir() { // a real directory, not a link: go down
					walk(p)
				}
			case e.Type()&os.ModeSymlink != 0:
				// A link is granted at its target: never one that reaches
				// a denied path, or a directory above one.
				if t, err := filepath.EvalSymlinks(p); err == nil && !under(t, denied) && !above(t, denied) {
					read = append(read, p)
				}
			default:
				read = append(read, p)
			}
		}
	}
	walk("/")
	return read, dirsOnly
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// under reports whether path is one of dirs or inside one.
func under(path string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return within(path, d) })
}

// above reports whether path is a directory above one of paths.
func above(path string, paths []string) bool {
	return slices.ContainsFunc(paths, func(d string) bool { return d != path && within(d, path) })
}
