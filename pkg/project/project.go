// Package project finds the files a project gives its agent — AGENTS.md,
// CLAUDE.md, Agent Skills — from the workspace up to the repository root,
// and opens them. pg-loop and pg-tool read them outside the sandbox, while
// the model's own commands can write the workspace (and plant a link to
// ~/.ssh/id_rsa named AGENTS.md), and other users can write shared parents
// such as /tmp (and plant a .git, an AGENTS.md or a skill there). So a file
// is read only when it is a regular file, not a symbolic link, owned by
// this user or root and writable by no one else; and the walk up stops
// below a directory that another user could change.
package project

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/powerglide/powerglide/pkg/atomicfile"
)

// Dirs returns the workspace and its parents up to the repository root
// (the first directory holding .git), nearest first; without a repository,
// the workspace alone. The workspace's links are resolved first, so the
// parents are the real ones. A parent that is a symbolic link, or that
// another user could change (see Trusted), ends the walk below it, as a
// .git there that another user could change does: the walk then found no
// repository. Each such stop that left out something a project gives (a
// .git, AGENTS.md, CLAUDE.md, .claude, .powerglide) is a warning.
func Dirs(workspace string) (dirs []string, warns []error) {
	dir, err := filepath.Abs(workspace)
	if err != nil {
		return nil, []error{err}
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	dirs = []string{dir}
	if isRoot(dir) {
		return dirs, nil
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		if err := trustedDir(d); err != nil {
			if what := projectEntry(d); what != "" {
				warns = append(warns, fmt.Errorf("%s left out, and the directories above: %w", filepath.Join(d, what), err))
			}
			return dirs[:1], warns // no repository one can trust
		}
		dirs = append(dirs, d)
		if isRoot(d) {
			return dirs, nil
		}
		if filepath.Dir(d) == d {
			return dirs[:1], nil // no repository: the workspace alone
		}
	}
}

// isRoot reports whether dir holds a .git that no other user could have
// put there (a directory or, in a linked worktree, a file).
func isRoot(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, ".git"))
	return err == nil && Trusted(fi) == nil
}

// trustedDir refuses a parent directory that is a symbolic link or that
// another user could change; its .git too.
func trustedDir(d string) error {
	fi, err := os.Lstat(d)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing there to read
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return &UntrustedError{Path: d, Why: "is a symbolic link"}
	}
	if err := Trusted(fi); err != nil {
		return &UntrustedError{Path: d, Why: err.Error()}
	}
	if gfi, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
		if err := Trusted(gfi); err != nil {
			return &UntrustedError{Path: filepath.Join(d, ".git"), Why: err.Error()}
		}
	}
	return nil
}

// projectEntry names the first entry of dir that a project gives, or "".
func projectEntry(dir string) string {
	for _, name := range []string{".git", "AGENTS.md", "CLAUDE.md", ".claude", ".powerglide"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return name
		}
	}
	return ""
}

// Trusted refuses a file or directory (fi from Lstat or Stat) that another
// user could have written: one owned by neither this user nor root, one
// writable by others, or by a group other than this user's own.
func Trusted(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("has no owner")
	}
	uid := os.Geteuid()
	if int(st.Uid) != uid && st.Uid != 0 {
		return fmt.Errorf("is owned by uid %d, not by you (uid %d) or root", st.Uid, uid)
	}
	perm := fi.Mode().Perm()
	if fi.Mode()&fs.ModeSymlink == 0 && (perm&0o002 != 0 || perm&0o020 != 0 && int(st.Gid) != os.Getegid()) {
		return fmt.Errorf("has mode %04o: other users may write it", perm)
	}
	return nil
}

// UntrustedError is a project file or directory that is not read.
type UntrustedError struct {
	Path string
	Why  string
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("%s %s: refused", e.Path, e.Why)
}

// Open opens a project file for reading: a regular file (never through a
// symbolic link, and without blocking on a named pipe) that Trusted
// accepts. A missing file is an error satisfying errors.Is(err,
// fs.ErrNotExist).
func Open(path string) (*os.File, error) {
	f, err := atomicfile.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		if terr := Trusted(fi); terr != nil {
			err = &UntrustedError{Path: path, Why: terr.Error()}
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
