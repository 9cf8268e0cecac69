package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"io/fs"
	"os"
	"path"
	"regexp"
	"regexp/syntax"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
)

const globMaxResults = 1000

var globTool = &Tool{
	Name: "glob",
	Description: `Find files in the workspace by name pattern; the newest (most recently modified) come first.
Patterns use / as separator: * and ? match within one path segment, ** matches any number of directories, [abc] a character class. "*.go" matches only at the top of "path"; "**/*.go" matches at any depth; "src/**/test_*.py" under src.
Files excluded by .gitignore and the .git directory are skipped. At most 1000 results.`,
	Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "description": "Glob pattern, relative to path, e.g. **/*.go."},
    "path": {"type": "string", "description": "Directory to search from, relative to the workspace root (default: the root)."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`),
	ReadOnly: true,
	Run:      runGlob,
}

func runGlob(ctx context.Context, s *Session, raw json.RawMessage) (string, error) {
	var in struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return "", err
	}
	start, err := s.searchDir(in.Path)
	if err != nil {
		return "", err
	}
	pat := strings.TrimPrefix(in.Pattern, "./")
	re, err := compileGlob("pattern", pat, false)
	if err != nil {
		return "", err
	}
	type hit struct {
		p   string
		mod time.Time
	}
	var hits []hit
	notes, err := s.walk(start, func(p string, d fs.DirEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel := p
		if start != "." {
			rel = strings.TrimPrefix(p, start+"/")
		}
		if re.match(rel) {
			var mod time.Time
			if fi, err := d.Info(); err == nil {
				mod = fi.ModTime()
			}
			hits = append(hits, hit{p, mod})
		}
		return nil
	})
	if err != nil {
		return "", s.pathErr(orDot(in.Path), err)
	}
	if len(hits) == 0 {
		return fmt.Sprintf("no files match %s under %s\n", in.Pattern, display(start)) + ignoreNotes(notes), nil
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if !hits[i].mod.Equal(hits[j].mod) {
			return hits[i].mod.After(hits[j].mod)
		}
		return hits[i].p < hits[j].p
	})
	var out strings.Builder
	for i, h := range hits {
		if i == globMaxResults {
			fmt.Fprintf(&out, "[%d more files match; narrow the pattern or path]\n", len(hits)-i)
			break
		}
		out.WriteString(h.p)
		out.WriteByte('\n')
	}
	out.WriteString(ignoreNotes(notes))
	return out.String(), nil
}

// ignoreNotes tells the model which ignore lines a search could not apply
// (so it knows files they meant to hide may show).
func ignoreNotes(notes []string) string {
	var b strings.Builder
	for _, n := range notes {
		fmt.Fprintf(&b, "[note: %s]\n", n)
	}
	return b.String()
}

// searchDir resolves the start directory of a search.
func (s *Session) searchDir(p string) (string, error) {
	r, err := s.rel(p)
	if err != nil {
		return "", err
	}
	fi, err := s.root.Stat(r)
	if err != nil {
		return "", s.pathErr(orDot(p), err)
	}
	if !fi.IsDir() && r == "." {
		return "", fmt.Errorf("%s is not a directory", orDot(p))
	}
	return display(r), nil
}

const (
	grepDefaultMax = 250
	grepMaxLine    = 500
	grepMaxFile    = 64 << 20
)

var grepTool = &Tool{
	Name: "grep",
	Description: `Search file contents in the workspace with a regular expression (Go RE2 syntax: no backreferences or lookaround; escape literal braces, dots, parentheses).
Output "path:line:text" per matching line, with "path-line-text" for context lines and "--" between groups; or only file names ("files_with_matches") or per-file counts ("count").
"path" may be a directory or one file; "glob" filters file names ("*.go", "**/*_test.go"; without a / it matches the base name at any depth).
Files excluded by .gitignore, the .git directory and binary files are skipped. Results stop after max_results lines (default 250).`,
	Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "pattern": {"type": "string", "minLength": 1, "description": "Regular expression (RE2) to search for."},
    "path": {"type": "string", "description": "Directory or file to search, relative to the workspace root (default: the root)."},
    "glob": {"type": "string", "description": "Only search files whose path matches this glob, e.g. *.go."},
    "ignore_case": {"type": "boolean", "description": "Case-insensitive matching (default false)."},
    "context": {"type": "integer", "minimum": 0, "maximum": 20, "description": "Lines of context before and after each match (default 0)."},
    "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"], "description": "content (default): matching lines; files_with_matches: file names only; count: matches per file."},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 5000, "description": "Stop after this many output lines (default 250)."}
  },
  "required": ["pattern"],
  "additionalProperties": false
}`),
	ReadOnly: true,
	Run:      runGrep,
}

type grepInput struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	Glob       string `json:"glob"`
	IgnoreCase bool   `json:"ignore_case"`
	Context    int    `json:"context"`
	OutputMode string `json:"output_mode"`
	MaxResults int    `json:"max_results"`
}

func runGrep(ctx context.Context, s *Session, raw json.RawMessage) (string, error) {
	var in grepInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return "", err
	}
	if in.MaxResults == 0 {
		in.MaxResults = grepDefaultMax
	}
	if in.OutputMode == "" {
		in.OutputMode = "content"
	}
	expr := in.Pattern
	if in.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return "", badInput(fmt.Errorf("field pattern: bad regular expression %q: %v", in.Pattern, err))
	}
	var globRe *glob
	if in.Glob != "" {
		g := strings.TrimPrefix(in.Glob, "./")
		if globRe, err = compileGlob("glob", g, !strings.Contains(g, "/")); err != nil {
			return "", err
		}
	}
	r, err := s.rel(in.Path)
	if err != nil {
		return "", err
	}
	fi, err := s.root.Stat(r)
	if err != nil {
		return "", s.pathErr(orDot(in.Path), err)
	}
	start := display(r)

	g := &grepper{re: re, in: in, root: s.root, rootFD: -1}
	if rf, err := s.root.Open("."); err == nil {
		defer rf.Close()
		g.rootFD = int(rf.Fd())
	}
	if lit, complete := re.LiteralPrefix(); complete && lit != "" {
		g.literal = []byte(lit)
	} else if lit, fold := requiredLiteral(expr); len(lit) >= 3 {
		g.required, g.fold = lit, fold
	} else if wholeFileSafe(expr) {
		// One pass over the whole file skips most files; line by line
		// only where it matched.
		g.whole = regexp.MustCompile("(?m)" + expr)
	}

	// The walk feeds files to several searchers as it goes; results are
	// printed in walk order. Once the cap is reached the rest is skipped.
	type job struct {
		i int
		p string
	}
	jobs := make(chan job, 512)
	results := map[int]grepFile{}
	var (
		mu      sync.Mutex
		lines   int
		full    atomic.Bool
		skipped atomic.Bool
		wg      sync.WaitGroup
	)
	defer widen()()
	for range min(runtime.GOMAXPROCS(0), 8) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &grepWorker{}
			defer w.close()
			for j := range jobs {
				if full.Load() || ctx.Err() != nil {
					skipped.Store(true)
					continue
				}
				r := g.file(w, j.p)
				mu.Lock()
				results[j.i] = r
				lines += r.lines
				if lines >= in.MaxResults {
					full.Store(true)
				}
				mu.Unlock()
			}
		}()
	}
	nfiles := 0
	var notes []string
	if !fi.IsDir() {
		jobs <- job{0, start}
		nfiles = 1
	} else {
		notes, err = s.walk(start, func(p string, d fs.DirEntry) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if full.Load() {
				skipped.Store(true)
				return fs.SkipAll
			}
			if !d.Type().IsRegular() || globRe != nil && !globRe.match(p) {
				return nil
			}
			jobs <- job{nfiles, p}
			nfiles++
			return nil
		})
	}
	close(jobs)
	wg.Wait()
	if err != nil {
		return "", s.pathErr(orDot(in.Path), err)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var out bytes.Buffer
	shown, matches, stopped := 0, 0, false
	for i := range nfiles {
		res := results[i]
		matches += res.lines
		for _, l := range res.out {
			if l != "--\n" {
				if shown == in.MaxResults {
					stopped = true
					break
				}
				shown++
			}
			out.WriteString(l)
		}
		if res.lines > len(res.out) && res.lines > 0 && in.OutputMode == "content" && shown == in.MaxResults {
			stopped = true
		}
	}
	if matches == 0 {
		return fmt.Sprintf("no matches for %s in %s (%d files searched)\n", in.Pattern, start, nfiles) + ignoreNotes(notes), nil
	}
	if stopped || matches > shown || skipped.Load() {
		fmt.Fprintf(&out, "[results stopped at %d lines; narrow the pattern, path or glob, or raise max_results]\n", in.MaxResults)
	}
	out.WriteString(ignoreNotes(notes))
	return out.String(), nil
}

type grepper struct {
	re       *regexp.Regexp
	whole    *regexp.Regexp // prefilter over the whole file, when safe
	literal  []byte         // the pattern is this literal
	required []byte         // every match contains this literal (ASCII case folded when fold)
	fold     bool
	in       grepInput
	root     *os.Root
	rootFD   int // a descriptor of the root for openat2, or -1
}

// grepWorker holds what one search goroutine reuses: a read buffer and the
// directory it opened last (through the root), so each file costs one
// openat relative to that directory instead of a walk of every path
// component. O_NOFOLLOW keeps a file swapped for a symlink from leading out.
type grepWorker struct {
	buf  []byte
	low  []byte
	dir  string
	dirF *os.File
}

func (w *grepWorker) close() {
	if w.dirF != nil {
		w.dirF.Close()
		w.dirF = nil
	}
}

// readFile reads the whole file p (slash-separated, relative to the root)
// into the worker's buffer; the slice is valid until the next call.
func (w *grepWorker) readFile(root *os.Root, rootFD int, p string) ([]byte, error) {
	fd, err := w.openFile(root, rootFD, p)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, errors.New("not a regular file")
	}
	size := int(min(st.Size, grepMaxFile))
	if cap(w.buf) < size+1 {
		w.buf = make([]byte, size+1)
	}
	buf := w.buf[:size+1]
	n := 0
	for n < len(buf) {
		k, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if k == 0 {
			break
		}
		n += k
	}
	return buf[:min(n, grepMaxFile)], nil
}

// openFile opens p read-only inside the root: with openat2 and
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS (one syscall, the kernel keeps it in
// the root) where the kernel has it, else relative to the file's directory
// opened through os.Root.
func (w *grepWorker) openFile(root *os.Root, rootFD int, p string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK
	if rootFD >= 0 && !noOpenat2.Load() {
		fd, err := unix.Openat2(rootFD, p, &unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS})
		if err != unix.ENOSYS && err != unix.EPERM {
			return fd, err
		}
		noOpenat2.Store(true) // old kernel or a seccomp filter
	}
	dir, name := path.Split(p)
	if w.dirF == nil || dir != w.dir {
		w.close()
		d := strings.TrimSuffix(dir, "/")
		if d == "" {
			d = "."
		}
		f, err := root.Open(d)
		if err != nil {
			return -1, err
		}
		w.dirF, w.dir = f, dir
	}
	return syscall.Openat(int(w.dirF.Fd()), name, flags, 0)
}

var noOpenat2 atomic.Bool

type grepFile struct {
	out   []string // output lines, newline-terminated
	lines int      // output lines counted against the cap
	count int      // matching lines
}

func (g *grepper) file(w *grepWorker, p string) grepFile {
	data, err := w.readFile(g.root, g.rootFD, p)
	if err != nil || isBinary(data[:min(len(data), 8192)]) {
		return grepFile{}
	}
	if g.literal != nil {
		if !bytes.Contains(data, g.literal) {
			return grepFile{}
		}
	} else if g.required != nil {
		if !containsLit(data, g.required, g.fold, &w.low) {
			return grepFile{}
		}
	} else if g.whole != nil && !g.whole.Match(data) {
		return grepFile{}
	}
	var res grepFile
	switch g.in.OutputMode {
	case "files_with_matches":
		// The prefilters only rule files out: a file passes on a match
		// across lines, or on the required literal alone.
		found := false
		forLines(data, func(_ int, line []byte) bool {
			found = g.match(line)
			return !found
		})
		if found {
			res.out = []string{p + "\n"}
			res.lines, res.count = 1, 1
		}
		return res
	case "count":
		n := 0
		forLines(data, func(_ int, line []byte) bool {
			if g.match(line) {
				n++
			}
			return true
		})
		if n > 0 {
			res.out = []string{fmt.Sprintf("%s:%d\n", p, n)}
			res.lines, res.count = 1, n
		}
		return res
	}
	c := g.in.Context
	var all [][]byte
	if c > 0 {
		forLines(data, func(_ int, line []byte) bool { all = append(all, line); return true })
	}
	lastPrinted := 0 // 1-based number of the last line printed
	forLines(data, func(n int, line []byte) bool {
		if !g.match(line) {
			return true
		}
		res.count++
		res.lines++
		if res.lines > g.in.MaxResults {
			return res.lines <= g.in.MaxResults+1 // one more says "there is more"
		}
		if c > 0 {
			from := max(n-c, lastPrinted+1, 1)
			if lastPrinted > 0 && from > lastPrinted+1 {
				res.out = append(res.out, "--\n")
			}
			for k := from; k < n; k++ {
				res.out = append(res.out, fmt.Sprintf("%s-%d-%s\n", p, k, cutLine(all[k-1])))
			}
		}
		res.out = append(res.out, fmt.Sprintf("%s:%d:%s\n", p, n, cutLine(line)))
		lastPrinted = n
		if c > 0 {
			for k := n + 1; k <= min(n+c, len(all)); k++ {
				if g.match(all[k-1]) {
					break // the next match prints it
				}
				res.out = append(res.out, fmt.Sprintf("%s-%d-%s\n", p, k, cutLine(all[k-1])))
				lastPrinted = k
			}
		}
		return true
	})
	return res
}

// wholeFileSafe reports whether matching "(?m)"+expr against a whole file
// finds every file with a line that expr matches, so that files it does
// not match can be skipped. A line is a substring of the file, so a match
// in it is a match in the file wherever the regexp only looks at the text
// it consumes, and where it looks around it sees the same: ^ under (?m)
// holds at a line start in the file too, \b and \B see a non-word
// character (\n, \r) or an edge on both sides. Three assertions do not
// carry over: \A and \z (and ^ under a (?-m) in the pattern) hold at a
// line's edges but only at the file's, and $ holds at the end of a line
// whose \r the search strips, which in the file is followed by \r. With
// any of them the file is searched line by line.
func wholeFileSafe(expr string) bool {
	re, err := syntax.Parse("(?m)"+expr, syntax.Perl)
	if err != nil {
		return false
	}
	var safe func(*syntax.Regexp) bool
	safe = func(r *syntax.Regexp) bool {
		switch r.Op {
		case syntax.OpBeginText, syntax.OpEndText, syntax.OpEndLine:
			return false
		}
		for _, sub := range r.Sub {
			if !safe(sub) {
				return false
			}
		}
		return true
	}
	return safe(re)
}

func (g *grepper) match(line []byte) bool {
	if g.literal != nil {
		return bytes.Contains(line, g.literal)
	}
	return g.re.Match(line)
}

// requiredLiteral finds a literal that every match of expr contains: the
// longest literal factor of a top-level concatenation. fold reports ASCII
// case-insensitive matching ((?i)); literals with other folding are not used.
func requiredLiteral(expr string) ([]byte, bool) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, false
	}
	re = re.Simplify()
	var best *syntax.Regexp
	consider := func(r *syntax.Regexp) {
		if r.Op != syntax.OpLiteral {
			return
		}
		if best == nil || len(r.Rune) > len(best.Rune) {
			best = r
		}
	}
	switch re.Op {
	case syntax.OpLiteral:
		consider(re)
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			consider(sub)
		}
	}
	if best == nil {
		return nil, false
	}
	fold := best.Flags&syntax.FoldCase != 0
	lit := []byte(string(best.Rune))
	for _, c := range lit {
		if c >= utf8.RuneSelf {
			if fold {
				return nil, false // non-ASCII case folding: leave it to the regexp
			}
			break
		}
	}
	if fold {
		lit = bytes.ToLower(lit)
	}
	return lit, fold
}

// containsLit is bytes.Contains, ASCII case-insensitive when fold (lit is
// lower case); scratch holds the lowered copy of data.
func containsLit(data, lit []byte, fold bool, scratch *[]byte) bool {
	if !fold {
		return bytes.Contains(data, lit)
	}
	// Unicode folds k to the Kelvin sign and s to the long s: where those
	// occur, let the regexp decide.
	if bytes.ContainsAny(lit, "ks") && (bytes.Contains(data, []byte("\u212A")) || bytes.Contains(data, []byte("\u017F"))) {
		return true
	}
	if cap(*scratch) < len(data) {
		*scratch = make([]byte, len(data))
	}
	low := (*scratch)[:len(data)]
	for i, c := range data {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		low[i] = c
	}
	return bytes.Contains(low, lit)
}

func forLines(data []byte, fn func(n int, line []byte) bool) {
	n := 0
	for len(data) > 0 {
		n++
		i := bytes.IndexByte(data, '\n')
		var line []byte
		if i < 0 {
			line, data = data, nil
		} else {
			line, data = data[:i], data[i+1:]
		}
		if !fn(n, bytes.TrimSuffix(line, []byte("\r"))) {
			return
		}
	}
}

func cutLine(b []byte) string {
	s := string(b)
	if len(s) > grepMaxLine {
		return truncRunes(s, grepMaxLine) + " [line cut]"
	}
	return s
}
