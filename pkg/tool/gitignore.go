package tool

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
)

// A hand-written .gitignore matcher: the patterns git documents
// (gitignore(5)): negation, directory-only patterns, anchoring, *, ?, [..]
// and **. No library in the module cache covered it without pulling in all
// of go-git.

type ignoreRule struct {
	re      *regexp.Regexp
	negate  bool
	dirOnly bool
}

// ignoreSet holds the rules of one .gitignore, relative to its directory.
type ignoreSet struct {
	base  string // directory of the file, slash-separated, "." for the root
	rules []ignoreRule
}

func parseIgnore(base string, data []byte) *ignoreSet {
	set := &ignoreSet{base: base}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.HasSuffix(line, " ") && !strings.HasSuffix(line, `\ `) {
			line = strings.TrimRight(line, " ")
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var r ignoreRule
		if strings.HasPrefix(line, "!") {
			r.negate = true
			line = line[1:]
		} else if strings.HasPrefix(line, `\`) {
			line = line[1:]
		}
		if strings.HasSuffix(line, "/") {
			r.dirOnly = true
			line = strings.TrimSuffix(line, "/")
		}
		if line == "" {
			continue
		}
		anchored := strings.Contains(line, "/")
		line = strings.TrimPrefix(line, "/")
		re, err := regexp.Compile(globRegexp(line, !anchored))
		if err != nil {
			continue
		}
		r.re = re
		set.rules = append(set.rules, r)
	}
	if len(set.rules) == 0 {
		return nil
	}
	return set
}

// globRegexp converts a gitignore-style glob to an anchored regexp. With
// anyDir the pattern may match at any depth.
// compileGlob compiles a glob a model gave in field; unlike a .gitignore
// line, a malformed one (an unclosed "[", a final backslash) is an error
// naming the field rather than a pattern that silently matches nothing.
func compileGlob(field, g string, anyDir bool) (*regexp.Regexp, error) {
	for i := 0; i < len(g); i++ {
		switch g[i] {
		case '\\':
			if i+1 == len(g) {
				return nil, badInput(fmt.Errorf("field %s: bad glob %q: it ends in a backslash", field, g))
			}
			i++
		case '[':
			j := strings.IndexByte(g[i+1:], ']')
			if j < 0 {
				return nil, badInput(fmt.Errorf("field %s: bad glob %q: unclosed [ (write \\[ for a literal bracket)", field, g))
			}
			i += j + 1
		}
	}
	re, err := regexp.Compile(globRegexp(g, anyDir))
	if err != nil {
		return nil, badInput(fmt.Errorf("field %s: bad glob %q: %v", field, g, err))
	}
	return re, nil
}

func globRegexp(g string, anyDir bool) string {
	var b strings.Builder
	b.WriteString("^")
	if anyDir {
		b.WriteString("(?:.*/)?")
	}
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case c == '*' && strings.HasPrefix(g[i:], "**/") && (i == 0 || g[i-1] == '/'):
			b.WriteString("(?:.*/)?")
			i += 2
		case c == '*' && g[i:] == "**" && (i == 0 || g[i-1] == '/'):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			j := strings.IndexByte(g[i+1:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := g[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		case c == '\\' && i+1 < len(g):
			i++
			b.WriteString(regexp.QuoteMeta(string(g[i])))
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return b.String()
}

// ignorer is the stack of .gitignore files that apply during a walk.
type ignorer struct {
	read func(p string) ([]byte, error) // an ignore file, relative to the root
	sets []*ignoreSet
}

// enter loads dir's .gitignore (dir slash-separated, relative to the root).
func (ig *ignorer) enter(dir string) {
	data, err := ig.read(path.Join(dir, ".gitignore"))
	if err != nil {
		return
	}
	if set := parseIgnore(dir, data); set != nil {
		ig.sets = append(ig.sets, set)
	}
}

// enterFD loads the .gitignore of a directory the walk has listed, read
// relative to the directory's descriptor.
func (ig *ignorer) enterFD(dir *os.File, p string, entries []fs.DirEntry) {
	i := sort.Search(len(entries), func(i int) bool { return entries[i].Name() >= ".gitignore" })
	if i == len(entries) || entries[i].Name() != ".gitignore" || !entries[i].Type().IsRegular() {
		return
	}
	// Not blocking on a FIFO put there since the listing.
	fd, err := syscall.Openat(int(dir.Fd()), ".gitignore", openReadFlags|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), path.Join(p, ".gitignore"))
	if checkRegular(f, f.Name()) != nil {
		f.Close()
		return
	}
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	f.Close()
	if err != nil {
		return
	}
	if set := parseIgnore(p, data); set != nil {
		ig.sets = append(ig.sets, set)
	}
}

// leave drops the sets of directories the walk has left.
func (ig *ignorer) leave(dir string) {
	for len(ig.sets) > 0 {
		base := ig.sets[len(ig.sets)-1].base
		if base == "." || dir == base || strings.HasPrefix(dir, base+"/") {
			return
		}
		ig.sets = ig.sets[:len(ig.sets)-1]
	}
}

// ignored applies the rules to a slash-separated path relative to the root;
// the last matching rule wins, deeper files over shallower ones.
func (ig *ignorer) ignored(p string, isDir bool) bool {
	for i := len(ig.sets) - 1; i >= 0; i-- {
		set := ig.sets[i]
		rel := p
		if set.base != "." {
			if !strings.HasPrefix(p, set.base+"/") {
				continue
			}
			rel = p[len(set.base)+1:]
		}
		for j := len(set.rules) - 1; j >= 0; j-- {
			r := set.rules[j]
			if r.dirOnly && !isDir {
				continue
			}
			if r.re.MatchString(rel) {
				return !r.negate
			}
		}
	}
	return false
}

// readIgnoreFile reads a .gitignore or .git/info/exclude inside the root:
// a regular file only (a FIFO there must not hang a search), 1 MiB at most.
func (s *Session) readIgnoreFile(p string) ([]byte, error) {
	f, err := s.openRegular(p, p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

// walk visits the files and directories under start (relative to the root),
// skipping .git and what .gitignore files exclude. Directories from the root
// down to start contribute their .gitignore too. fn may return fs.SkipDir or
// fs.SkipAll.
func (s *Session) walk(start string, fn func(p string, d fs.DirEntry) error) error {
	ig := &ignorer{read: s.readIgnoreFile}
	start = path.Clean(start)
	if data, err := ig.read(".git/info/exclude"); err == nil {
		if set := parseIgnore(".", data); set != nil {
			ig.sets = append(ig.sets, set)
		}
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
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	err = visit(start, fs.FileInfoToDirEntry(fi))
	if err == nil && fi.IsDir() {
		err = walkFD(f, start, s.rootPath, visit, ig.enterFD)
	}
	if err == fs.SkipDir || err == fs.SkipAll {
		return nil
	}
	return err
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
