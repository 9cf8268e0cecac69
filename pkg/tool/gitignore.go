package tool

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
)

// A .gitignore matcher for the patterns git documents (gitignore(5)):
// negation, directory-only patterns, anchoring, *, ?, [..] and **, each
// pattern matched by doublestar (see glob.go). No library covered the
// rules themselves without pulling in all of go-git.

type ignoreRule struct {
	glob    *glob
	negate  bool
	dirOnly bool
}

// ignoreSet holds the rules of one .gitignore, relative to its directory.
type ignoreSet struct {
	base  string // directory of the file, slash-separated, "." for the root
	rules []ignoreRule
}

// parseIgnore reads the ignore file named file, whose rules apply below
// base. A line that is no valid pattern is not applied; it comes back in
// notes (git would not match with it either, but silently).
func parseIgnore(base, file string, data []byte) (set *ignoreSet, notes []string) {
	set = &ignoreSet{base: base}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.HasSuffix(line, " ") && !strings.HasSuffix(line, `\ `) {
			line = strings.TrimRight(line, " ")
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r, err := ignoreLine(line)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s line %d is not applied: bad pattern %q: %v", file, n, sc.Text(), err))
			continue
		}
		if r.glob != nil {
			set.rules = append(set.rules, r)
		}
	}
	if len(set.rules) == 0 {
		return nil, notes
	}
	return set, notes
}

// ignoreLine parses one pattern line; a rule with no glob ("!" or "/"
// alone) matches nothing.
func ignoreLine(line string) (ignoreRule, error) {
	var r ignoreRule
	if strings.HasPrefix(line, "!") {
		r.negate = true
		line = line[1:]
	} else if strings.HasPrefix(line, `\`) && len(line) > 1 && (line[1] == '#' || line[1] == '!') {
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") && !strings.HasSuffix(line, `\/`) {
		r.dirOnly = true
		line = strings.TrimSuffix(line, "/")
	}
	if line == "" {
		return r, nil
	}
	// A slash at the start or in the middle anchors the pattern to the
	// file's directory; otherwise it matches at any depth.
	anchored := strings.Contains(line, "/")
	line = strings.TrimPrefix(line, "/")
	pat, err := toDoublestar(line, false)
	if err != nil {
		return r, err
	}
	if !anchored {
		pat = "**/" + pat
	}
	// "dir/**" is everything inside dir, not dir itself: a rule
	// re-including a file in it must still find dir walked.
	if strings.HasSuffix(pat, "/**") {
		pat += "/*"
	}
	r.glob = &glob{pat}
	return r, nil
}

// ignorer is the stack of .gitignore files that apply during a walk.
type ignorer struct {
	read  func(p string) ([]byte, error) // an ignore file, relative to the root
	sets  []*ignoreSet
	notes []string // ignore lines not applied, for the tool's answer
}

// add parses an ignore file and pushes its rules.
func (ig *ignorer) add(base, file string, data []byte) {
	set, notes := parseIgnore(base, file, data)
	ig.notes = append(ig.notes, notes...)
	if set != nil {
		ig.sets = append(ig.sets, set)
	}
}

// enter loads dir's .gitignore (dir slash-separated, relative to the root).
func (ig *ignorer) enter(dir string) {
	file := path.Join(dir, ".gitignore")
	data, err := ig.read(file)
	if err != nil {
		return
	}
	ig.add(dir, file, data)
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
	ig.add(p, f.Name(), data)
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
			if r.glob.match(rel) {
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
