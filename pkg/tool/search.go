package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"regexp/syntax"
	"runtime"
	"sort"
	"strings"
	"sync"
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
	re, err := regexp.Compile(globRegexp(pat, false))
	if err != nil {
		return "", fmt.Errorf("bad glob pattern %q: %v", in.Pattern, err)
	}
	type hit struct {
		p   string
		mod time.Time
	}
	var hits []hit
	err = s.walk(start, func(p string, d fs.DirEntry) error {
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
		if re.MatchString(rel) {
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
		return fmt.Sprintf("no files match %s under %s\n", in.Pattern, display(start)), nil
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
	return out.String(), nil
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
		return "", fmt.Errorf("bad regular expression %q: %v", in.Pattern, err)
	}
	var globRe *regexp.Regexp
	if in.Glob != "" {
		g := strings.TrimPrefix(in.Glob, "./")
		if globRe, err = regexp.Compile(globRegexp(g, !strings.Contains(g, "/"))); err != nil {
			return "", fmt.Errorf("bad glob %q: %v", in.Glob, err)
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

	// Walk in one goroutine, search in several, print in walk order.
	var files []string
	if !fi.IsDir() {
		files = []string{start}
	} else {
		err = s.walk(start, func(p string, d fs.DirEntry) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			if globRe != nil && !globRe.MatchString(p) {
				return nil
			}
			files = append(files, p)
			return nil
		})
		if err != nil {
			return "", s.pathErr(orDot(in.Path), err)
		}
	}
	g := &grepper{re: re, in: in, root: s.root}
	if lit, complete := re.LiteralPrefix(); complete && lit != "" {
		g.literal = []byte(lit)
	} else if lit, fold := requiredLiteral(expr); len(lit) >= 3 {
		g.required, g.fold = lit, fold
	} else if !strings.Contains(in.Pattern, "$") {
		// One pass over the whole file skips most files; line by line
		// only where it matched. (?m) keeps ^ meaning a line start; $ is
		// left out because of CRLF files.
		g.whole = regexp.MustCompile("(?m)" + expr)
	}
	results := make([]grepFile, len(files))
	var next, lines int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), 8, max(len(files), 1))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &grepWorker{}
			defer w.close()
			for {
				mu.Lock()
				i := next
				next++
				full := lines >= int64(in.MaxResults)
				mu.Unlock()
				if int(i) >= len(files) || full || ctx.Err() != nil {
					return
				}
				results[i] = g.file(w, files[i])
				mu.Lock()
				lines += int64(results[i].lines)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var out bytes.Buffer
	shown, matches, stopped := 0, 0, false
	for _, res := range results {
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
		return fmt.Sprintf("no matches for %s in %s (%d files searched)\n", in.Pattern, start, len(files)), nil
	}
	if stopped || matches > shown || int(next) < len(files) && lines >= int64(in.MaxResults) {
		fmt.Fprintf(&out, "[results stopped at %d lines; narrow the pattern, path or glob, or raise max_results]\n", in.MaxResults)
	}
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
}

// grepWorker holds what one search goroutine reuses: a read buffer and the
// directory it opened last, so each file is one openat, not one per path
// component.
type grepWorker struct {
	buf     []byte
	low     []byte
	dir     string
	dirRoot *os.Root
}

func (w *grepWorker) open(root *os.Root, p string) (*os.File, error) {
	dir, name := path.Split(p)
	if w.dirRoot == nil || dir != w.dir {
		w.close()
		r := root
		if dir != "" {
			var err error
			if r, err = root.OpenRoot(strings.TrimSuffix(dir, "/")); err != nil {
				return nil, err
			}
			w.dirRoot = r
		}
		w.dir = dir
		if dir == "" {
			return root.Open(name)
		}
	}
	return w.dirRoot.Open(name)
}

func (w *grepWorker) close() {
	if w.dirRoot != nil {
		w.dirRoot.Close()
		w.dirRoot = nil
	}
}

// read reads a whole file into the worker's buffer (valid until the next read).
func (w *grepWorker) read(f *os.File) ([]byte, error) {
	size := grepMaxFile
	if fi, err := f.Stat(); err == nil && fi.Size() < int64(size) {
		size = int(fi.Size())
	}
	if cap(w.buf) < size+1 {
		w.buf = make([]byte, size+1)
	}
	buf := w.buf[:cap(w.buf)]
	n := 0
	for n < len(buf) && n < grepMaxFile {
		k, err := f.Read(buf[n:])
		n += k
		if err == io.EOF || k == 0 && err == nil {
			break
		}
		if err != nil {
			return nil, err
		}
		if n == len(buf) && n < grepMaxFile { // the file grew: make room
			nb := make([]byte, min(2*len(buf), grepMaxFile))
			copy(nb, buf)
			w.buf, buf = nb, nb
		}
	}
	return buf[:n], nil
}

type grepFile struct {
	out   []string // output lines, newline-terminated
	lines int      // output lines counted against the cap
	count int      // matching lines
}

func (g *grepper) file(w *grepWorker, p string) grepFile {
	f, err := w.open(g.root, p)
	if err != nil {
		return grepFile{}
	}
	data, err := w.read(f)
	f.Close()
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
		res.out = []string{p + "\n"}
		res.lines, res.count = 1, 1
		return res
	case "count":
		n := 0
		forLines(data, func(_ int, line []byte) bool {
			if g.match(line) {
				n++
			}
			return true
		})
		res.out = []string{fmt.Sprintf("%s:%d\n", p, n)}
		res.lines, res.count = 1, n
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
