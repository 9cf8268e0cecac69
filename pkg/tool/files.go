package tool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/powerglide/powerglide/pkg/atomicfile"
)

const (
	readDefaultLimit = 2000
	readMaxLineLen   = 2000
)

var readTool = &Tool{
	Name: "read",
	Description: `Read a text file of the workspace. Lines come numbered (cat -n style: number, tab, text) so edits can quote them exactly.
By default it returns the first 2000 lines; for longer files use "offset" (first line, 1-based) and "limit" (number of lines) to page, as the output says.
Lines longer than 2000 characters are cut. Binary files are refused. Paths are relative to the workspace root (absolute paths inside it work too); the files of a skill's folder (see the skill tool) are readable by their absolute paths.`,
	Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File to read, relative to the workspace root."},
    "offset": {"type": "integer", "minimum": 1, "description": "First line to return, 1-based (default 1)."},
    "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to return (default 2000)."}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
	ReadOnly: true,
	Run:      runRead,
}

func runRead(ctx context.Context, s *Session, raw json.RawMessage) (string, error) {
	var in struct {
		Path   string `json:"path"`
		Offset int    `json:"offset"`
		Limit  int    `json:"limit"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return "", err
	}
	if in.Offset < 1 {
		in.Offset = 1
	}
	if in.Limit < 1 {
		in.Limit = readDefaultLimit
	}
	f, err := s.openRead(in.Path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", s.pathErr(in.Path, err)
	}
	br := bufio.NewReaderSize(ctxReader{ctx, f}, 16<<10)
	head, _ := br.Peek(8192)
	if isBinary(head) {
		return "", fmt.Errorf("%s is a binary file (%d bytes); read only shows text: use bash (e.g. xxd or file) to inspect it", in.Path, fi.Size())
	}
	if fi.Size() == 0 {
		return fmt.Sprintf("[%s is empty]\n", in.Path), nil
	}
	var out strings.Builder
	line, shown := 0, 0
	for {
		text, err := br.ReadString('\n')
		if text == "" && err != nil {
			if ctx.Err() != nil {
				return "", err
			}
			if err != io.EOF {
				return "", s.pathErr(in.Path, err)
			}
			break
		}
		line++
		if line >= in.Offset && shown < in.Limit {
			text = strings.TrimRight(text, "\r\n")
			if len(text) > readMaxLineLen {
				text = truncRunes(text, readMaxLineLen) + " [line cut]"
			}
			if !utf8.ValidString(text) {
				text = strings.ToValidUTF8(text, "\uFFFD")
			}
			writeNumbered(&out, line, text)
			shown++
		}
		if err != nil {
			break
		}
		if shown == in.Limit && line >= in.Offset {
			// Count the rest cheaply so the model knows how far the file goes.
			n, err := countLines(br)
			if err != nil && ctx.Err() != nil {
				return "", err
			}
			total := line + n
			if total > line {
				fmt.Fprintf(&out, "[showing lines %d-%d of %d; call read with offset=%d to continue]\n", in.Offset, line, total, line+1)
			}
			return out.String(), nil
		}
	}
	if shown == 0 {
		return "", fmt.Errorf("%s has %d lines; offset %d is past the end", in.Path, line, in.Offset)
	}
	return out.String(), nil
}

// writeNumbered writes "%6d\t%s\n" without fmt's cost (read's hot path).
func writeNumbered(b *strings.Builder, n int, text string) {
	var num [20]byte
	d := strconv.AppendInt(num[:0], int64(n), 10)
	for i := len(d); i < 6; i++ {
		b.WriteByte(' ')
	}
	b.Write(d)
	b.WriteByte('\t')
	b.WriteString(text)
	b.WriteByte('\n')
}

func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 64<<10)
	n, last := 0, byte('\n')
	for {
		k, err := r.Read(buf)
		if k > 0 {
			n += bytes.Count(buf[:k], []byte{'\n'})
			last = buf[k-1]
		}
		if err != nil {
			if last != '\n' {
				n++
			}
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
	}
}

func truncRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// isBinary: a NUL byte, or mostly invalid UTF-8, in the first block.
func isBinary(b []byte) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	if len(b) == 0 || utf8.Valid(b) {
		return false
	}
	bad := 0
	for i := 0; i < len(b); {
		r, w := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && w == 1 && i < len(b)-4 {
			bad++
		}
		i += w
	}
	return bad*10 > len(b)
}

// openRead opens a regular file for reading inside the root, or a full
// output the tool saved.
func (s *Session) openRead(p string) (*os.File, error) {
	if dir, name, ok := s.outputFile(p); ok {
		return openSaved(p, dir, name)
	}
	r, err := s.rel(p)
	if errors.Is(err, errOutside) {
		abs := p
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(s.rootPath, abs)
		}
		if f, ok, serr := s.openSkillFile(abs); ok {
			return f, serr
		}
	}
	if err != nil {
		return nil, err
	}
	return s.openRegular(p, r)
}

var writeTool = &Tool{
	Name:        "write",
	WritesFiles: true,
	Description: `Write a file in the workspace, replacing it if it exists; missing parent directories are created.
Prefer edit for changing part of an existing file. An existing file keeps its permissions. The write is atomic: readers see the old or the new content, never half.`,
	Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File to write, relative to the workspace root."},
    "content": {"type": "string", "description": "The complete new content of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`),
	Run: runWrite,
}

func runWrite(ctx context.Context, s *Session, raw json.RawMessage) (string, error) {
	var in struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return "", err
	}
	r, err := s.rel(in.Path)
	if err != nil {
		return "", err
	}
	if r == "." {
		return "", fmt.Errorf("path %q names the workspace root, not a file", in.Path)
	}
	existed := true
	if fi, err := s.root.Stat(r); err == nil && fi.IsDir() {
		return "", fmt.Errorf("%s is a directory", in.Path)
	} else if err == nil && !fi.Mode().IsRegular() {
		return "", notRegular(in.Path, atomicfile.Kind(fi.Mode()))
	} else if err != nil && errors.Is(err, fs.ErrNotExist) {
		existed = false
	} else if err != nil {
		return "", s.pathErr(in.Path, err)
	}
	unlock := s.lockPath(r)
	defer unlock()
	note, err := s.vetoed(ctx, r, in.Path, func() error {
		if dir := filepath.Dir(r); dir != "." {
			if err := s.root.MkdirAll(dir, 0o755); err != nil {
				return s.pathErr(in.Path, err)
			}
		}
		return s.writeFile(r, in.Path, []byte(in.Content), 0o644)
	})
	if err != nil {
		return "", err
	}
	verb := "created"
	if existed {
		verb = "overwrote"
	}
	return fmt.Sprintf("%s %s (%d bytes, %d lines)\n%s", verb, display(r), len(in.Content), lineCount(in.Content), note), nil
}

func lineCount(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// writeFile replaces a file atomically inside the root, keeping the mode of
// an existing file (perm is used for a new one).
func (s *Session) writeFile(r, shown string, data []byte, perm os.FileMode) error {
	if fi, err := s.root.Stat(r); err == nil {
		perm = fi.Mode().Perm()
	}
	// Writing through a symlink replaces its target, not the link.
	target := r
	if li, err := s.root.Lstat(r); err == nil && li.Mode()&os.ModeSymlink != 0 {
		if dest, err := s.root.Readlink(r); err == nil && !filepath.IsAbs(dest) {
			target = filepath.Join(filepath.Dir(r), dest)
			if t, err := s.rel(target); err != nil {
				return err
			} else {
				target = t
			}
		}
	}
	// O_EXCL settles a clash of names; they need not be unguessable.
	tmp := filepath.Join(filepath.Dir(target), fmt.Sprintf(".%s.pg-tool-%08x.tmp", filepath.Base(target), rand.Uint32()))
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return s.pathErr(shown, err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = s.root.Chmod(tmp, perm) // umask may have narrowed it
	}
	if werr == nil {
		werr = s.root.Rename(tmp, target)
	}
	if werr != nil {
		_ = s.root.Remove(tmp)
		return s.pathErr(shown, werr)
	}
	return nil
}

var lsTool = &Tool{
	Name: "ls",
	Description: `List a directory of the workspace: one entry per line, directories end with "/", symlinks show their target, files their size.
Use glob to find files by pattern across the tree and grep to search contents.`,
	Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Directory to list, relative to the workspace root (default: the root)."},
    "all": {"type": "boolean", "description": "Include entries whose names start with a dot (default false)."}
  },
  "additionalProperties": false
}`),
	ReadOnly: true,
	Run:      runLs,
}

const lsMaxEntries = 1000

func runLs(ctx context.Context, s *Session, raw json.RawMessage) (string, error) {
	var in struct {
		Path string `json:"path"`
		All  bool   `json:"all"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return "", err
	}
	r, err := s.rel(in.Path)
	if err != nil {
		return "", err
	}
	f, err := s.root.Open(r)
	if err != nil {
		return "", s.pathErr(orDot(in.Path), err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		if fi, serr := f.Stat(); serr == nil && !fi.IsDir() {
			return "", fmt.Errorf("%s is a file, not a directory; use read to see it", in.Path)
		}
		return "", s.pathErr(orDot(in.Path), err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var out strings.Builder
	fmt.Fprintf(&out, "%s/\n", strings.TrimSuffix(display(r), "/"))
	n, hidden := 0, 0
	for _, e := range entries {
		if !in.All && strings.HasPrefix(e.Name(), ".") {
			hidden++
			continue
		}
		if n == lsMaxEntries {
			fmt.Fprintf(&out, "[... %d more entries not shown]\n", len(entries)-n-hidden)
			break
		}
		n++
		switch {
		case e.IsDir():
			fmt.Fprintf(&out, "  %s/\n", e.Name())
		case e.Type()&fs.ModeSymlink != 0:
			dest, _ := s.root.Readlink(filepath.Join(r, e.Name()))
			fmt.Fprintf(&out, "  %s -> %s\n", e.Name(), dest)
		default:
			size := int64(0)
			if fi, err := e.Info(); err == nil {
				size = fi.Size()
			}
			fmt.Fprintf(&out, "  %s (%s)\n", e.Name(), humanSize(size))
		}
	}
	if n == 0 {
		out.WriteString("  (empty)\n")
	}
	if hidden > 0 {
		fmt.Fprintf(&out, "[%d hidden entries; set all=true to show them]\n", hidden)
	}
	return out.String(), nil
}

func orDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func humanSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
