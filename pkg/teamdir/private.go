package teamdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Check refuses a team directory that another user could change. Whoever
// can rename or create entries on the way to it can swap the team's files
// (the queue, the worker records the monitor signals by) for their own. So
// the data root, teams/ and the team's directory must each be a directory
// owned by this user (or root) that no one else may write; and every
// directory a name is looked up in on the way there (those above the data
// root, and those its symbolic links lead through) must be owned by this
// user or root too, and writable by others only when sticky (/tmp), where
// no one may rename another's entries. A part that does not exist yet is not checked: Ensure
// checks again once it made it (and so finds a directory another user
// created first). The error is bad input (exit 2): nothing was changed.
func (d Dir) Check() error {
	home, err := filepath.Abs(d.Home)
	if err != nil {
		return err
	}
	c := checker{uid: os.Geteuid(), seen: map[string]bool{}}
	for _, p := range []struct{ path, what string }{
		{home, "data root"},
		{Teams(home), "teams directory"},
		{filepath.Join(Teams(home), d.Team), "team directory"},
	} {
		fi, err := os.Stat(p.path)
		if errors.Is(err, fs.ErrNotExist) {
			break // nor the parts below it
		}
		if err != nil {
			return err
		}
		if err := c.own(p.what, p.path, fi); err != nil {
			return err
		}
	}
	return c.walk(filepath.Join(Teams(home), d.Team))
}

// checker checks the directories on the way to a team directory.
type checker struct {
	uid  int
	seen map[string]bool // the directories walk checked
}

// own refuses path (a part of the data root, fi its Stat) unless it is a
// directory of this user or root that others cannot write.
func (c *checker) own(what, path string, fi fs.FileInfo) error {
	if !fi.IsDir() {
		return &UnsafeError{What: what, Path: path, Why: "is not a directory"}
	}
	if err := c.owner(what, path, fi); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return &UnsafeError{What: what, Path: path, Why: fmt.Sprintf("has mode %04o: others may write in it", fi.Mode().Perm()), Fix: "chmod go-w it"}
	}
	return nil
}

// maxLinks bounds the symbolic links walk follows, as the kernel's 40.
const maxLinks = 40

// walk follows the absolute path one name at a time, as the kernel does,
// symbolic links included, and checks every directory it looks a name up
// in (through) until the path ends or a name is missing.
func (c *checker) walk(path string) error {
	dir := "/"
	todo := strings.Split(path, "/")
	for links := 0; len(todo) > 0; {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			dir = filepath.Dir(dir)
			continue
		}
		if err := c.through(dir); err != nil {
			return err
		}
		next := filepath.Join(dir, name)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			dir = next
			continue
		}
		if links++; links > maxLinks {
			return fmt.Errorf("%s: too many levels of symbolic links", path)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return err
		}
		if filepath.IsAbs(target) {
			dir = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return nil
}

// through refuses a directory a name is looked up in (dir, with no links
// in its path) unless it is owned by this user or root, and writable by
// others only when sticky (/tmp), where no one may rename another's
// entries.
func (c *checker) through(dir string) error {
	if c.seen[dir] {
		return nil
	}
	c.seen[dir] = true
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	const what = "directory on the way to the team directory"
	if err := c.owner(what, dir, fi); err != nil {
		return err
	}
	if fi.IsDir() && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return &UnsafeError{What: what, Path: dir, Why: fmt.Sprintf("has mode %04o: others may rename what is in it", fi.Mode().Perm())}
	}
	return nil
}

// owner refuses a directory that neither this user nor root owns.
func (c *checker) owner(what, path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return &UnsafeError{What: what, Path: path, Why: "has no owner"}
	}
	if int(st.Uid) != c.uid && st.Uid != 0 {
		return &UnsafeError{What: what, Path: path, Why: fmt.Sprintf("is owned by uid %d, not by you (uid %d) or root", st.Uid, c.uid)}
	}
	return nil
}

// UnsafeError is a part of the way to a team directory that another user
// could change. It is bad input (exit 2).
type UnsafeError struct {
	What string // "data root", "teams directory", ...
	Path string
	Why  string
	Fix  string // what to do, when not choosing another data root
}

func (e *UnsafeError) Error() string {
	fix := "use a POWERGLIDE_HOME that only you can change"
	if e.Fix != "" {
		fix = e.Fix + ", or " + fix
	}
	return fmt.Sprintf("refusing %s %s: it %s, so another user could swap the team's files; %s", e.What, e.Path, e.Why, fix)
}

// BadInput marks the error as bad input.
func (e *UnsafeError) BadInput() bool { return true }
