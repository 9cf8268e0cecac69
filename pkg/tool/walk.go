package tool

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// The sandboxed directory walker glob, grep and ls share: it never leaves
// the root (each directory is opened relative to its parent with
// O_NOFOLLOW) and it leaves out what .git and .gitignore files exclude
// (gitignore.go).

// walk visits the files and directories under start (relative to the root),
// skipping .git and what .gitignore files exclude. Directories from the root
// down to start contribute their .gitignore too. fn may return fs.SkipDir or
// fs.SkipAll. notes are the ignore lines met that could not be applied.
func (s *Session) walk(start string, fn func(p string, d fs.DirEntry) error) (notes []string, err error) {
	ig := &ignorer{read: s.readIgnoreFile}
	start = path.Clean(start)
	if data, err := ig.read(".git/info/exclude"); err == nil {
		ig.add(".", ".git/info/exclude", data)
	}
	// Parents of start: their rules apply below them.
	if start != "." {
		ig.enter(".")
		parts := strings.Split(start, "/")
		for i := 1; i < len(parts); i++ {
			ig.enter(strings.Join(parts[:i], "/"))
		}
	}
	visit := func(p string, d fs.DirEntry) error {
		if d.IsDir() {
			if p != start {
				if d.Name() == ".git" || ig.ignored(p, true) {
					return fs.SkipDir
				}
			}
			ig.leave(p)
			return fn(p, d)
		}
		ig.leave(path.Dir(p))
		if ig.ignored(p, false) {
			return nil
		}
		return fn(p, d)
	}
	f, err := s.root.Open(start)
	if err != nil {
		return ig.notes, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ig.notes, err
	}
	err = visit(start, fs.FileInfoToDirEntry(fi))
	if err == nil && fi.IsDir() {
		err = walkFD(f, start, s.rootPath, visit, ig.enterFD)
	}
	if err == fs.SkipDir || err == fs.SkipAll {
		err = nil
	}
	return ig.notes, err
}

// walkFD walks below an open directory like fs.WalkDir (entries in name
// order, fs.SkipDir and fs.SkipAll honoured), opening each subdirectory
// relative to its parent's descriptor with O_NOFOLLOW: one openat per
// directory, and no symlink is ever followed out of the root.
func walkFD(dir *os.File, p, rootPath string, visit func(string, fs.DirEntry) error, listed func(*os.File, string, []fs.DirEntry)) error {
	entries, err := dir.ReadDir(-1)
	if err != nil && len(entries) == 0 {
		return nil // unreadable directories are skipped, as grep -s would
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	listed(dir, p, entries)
	for _, e := range entries {
		child := path.Join(p, e.Name())
		err := visit(child, e)
		if !e.IsDir() {
			if err == fs.SkipDir {
				return nil // the rest of this directory
			}
			if err != nil {
				return err
			}
			continue
		}
		if err == fs.SkipDir {
			continue
		}
		if err != nil {
			return err
		}
		fd, oerr := syscall.Openat(int(dir.Fd()), e.Name(), syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if oerr != nil {
			continue
		}
		// Named by its absolute path: DirEntry.Info stats parent/name.
		sub := os.NewFile(uintptr(fd), filepath.Join(rootPath, child))
		err = walkFD(sub, child, rootPath, visit, listed)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
