package tool

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// Long outputs: the result keeps head and tail, and the whole text (up to
// MaxSaved bytes) is saved in the output directory, where read may open it
// although it lies outside the root. Only files this tool saved are opened
// there: by name pattern, without following links, regular, owned by us.

// DefaultMaxSaved is the default cap in bytes on one saved full output.
const DefaultMaxSaved = 16 << 20

// capOutput keeps head and tail of a long output and saves the whole text.
// what names the text in the marker: "output", or "error" for error text
// (a verifier's or an external tool's), which can be as long.
func (s *Session) capOutput(call protocol.ToolCall, out, what string) (string, bool, string) {
	limit := s.opts.MaxOutput
	if limit < 0 || utf8.RuneCountInString(out) <= limit {
		return out, false, ""
	}
	file, cut, err := s.saveFull(call, out, what)
	total := utf8.RuneCountInString(out)
	// The marker takes about 300 characters of the budget.
	budget := max(limit-300, limit/2)
	head := cutRunes(out, budget*2/3, true)
	tail := cutRunes(out, budget-utf8.RuneCountInString(head), false)
	omitted := total - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail)
	var marker string
	switch {
	case err != nil:
		marker = fmt.Sprintf("\n\n[... %d characters omitted (%s had %d); saving the full %s failed: %v ...]\n\n", omitted, what, total, what, err)
		file = ""
	case cut:
		marker = fmt.Sprintf("\n\n[... %d characters omitted (%s had %d); %s keeps its first and last %d bytes (the saved-output cap); read it with offset/limit ...]\n\n", omitted, what, total, file, s.opts.MaxSaved/2)
	default:
		marker = fmt.Sprintf("\n\n[... %d characters omitted (%s had %d); the full %s is in %s; read it with offset/limit ...]\n\n", omitted, what, total, what, file)
	}
	return head + marker + tail, true, file
}

// cutRunes returns the first (or last) n runes of s, on line boundaries
// when one is near.
func cutRunes(s string, n int, head bool) string {
	if n <= 0 {
		return ""
	}
	if head {
		i, count := 0, 0
		for i < len(s) && count < n {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			count++
		}
		out := s[:i]
		if j := strings.LastIndexByte(out, '\n'); j > len(out)*3/4 {
			out = out[:j+1]
		}
		return out
	}
	i, count := len(s), 0
	for i > 0 && count < n {
		_, w := utf8.DecodeLastRuneInString(s[:i])
		i -= w
		count++
	}
	out := s[i:]
	if j := strings.IndexByte(out, '\n'); j >= 0 && j < len(out)/4 {
		out = out[j+1:]
	}
	return out
}

// outputDir is where full outputs are saved.
func (s *Session) outputDir() string {
	if s.opts.OutputDir != "" {
		return s.opts.OutputDir
	}
	return filepath.Join(os.TempDir(), "pg-tool-output")
}

// saveFull saves out in the output directory, cut to its head and tail
// when it is longer than MaxSaved bytes (cut reports that).
func (s *Session) saveFull(call protocol.ToolCall, out, what string) (file string, cut bool, err error) {
	dir := s.outputDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, err
	}
	if limit := s.opts.MaxSaved; limit > 0 && len(out) > limit {
		head, tail := headBytes(out, limit/2), tailBytes(out, limit/2)
		out = head + fmt.Sprintf("\n\n[... %d bytes not saved: saved outputs keep their first and last %d bytes (--max-saved-output %d) ...]\n\n", len(out)-len(head)-len(tail), limit/2, limit) + tail
		cut = true
	}
	kind := ""
	if what != "output" {
		kind = "-" + what
	}
	// O_EXCL: a name taken (or a symlink planted there) is never written
	// through; another name is tried.
	for try := 0; ; try++ {
		name := fmt.Sprintf("%s-%s%s-%08x.txt", time.Now().UTC().Format("20060102T150405"), safeName(call.Name), kind, rand.Uint32())
		p := filepath.Join(dir, name)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if errors.Is(err, fs.ErrExist) && try < 10 {
			continue
		}
		if err != nil {
			return "", false, err
		}
		_, err = f.WriteString(out)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(p)
			return "", false, err
		}
		return p, cut, nil
	}
}

// headBytes and tailBytes cut s to at most n bytes on a rune boundary.
func headBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return truncRunes(s, n)
}

func tailBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

// savedName reports whether name has the form saveFull gives its files:
// 20060102T150405-TOOL[-error]-0123abcd.txt.
func savedName(name string) bool {
	stamp, rest, ok := strings.Cut(name, "-")
	if !ok || len(stamp) != 15 || stamp[8] != 'T' || !allIn(stamp[:8]+stamp[9:], "0123456789") {
		return false
	}
	rest, ok = strings.CutSuffix(rest, ".txt")
	i := strings.LastIndexByte(rest, '-')
	if !ok || i < 1 || len(rest)-i-1 != 8 || !allIn(rest[i+1:], "0123456789abcdef") {
		return false
	}
	return safeName(rest[:i]) == rest[:i]
}

func allIn(s, set string) bool {
	for _, r := range s {
		if !strings.ContainsRune(set, r) {
			return false
		}
	}
	return true
}

// outputFile reports whether an absolute path names a file directly in
// the output directory (which read may open although it lies outside the
// root), and splits it into that directory and the file's name.
func (s *Session) outputFile(p string) (dir, name string, ok bool) {
	if !filepath.IsAbs(p) {
		return "", "", false
	}
	dir = s.outputDir()
	r, err := filepath.Rel(dir, filepath.Clean(p))
	if err != nil || r == "." || strings.Contains(r, "/") || strings.HasPrefix(r, "..") {
		return "", "", false
	}
	return dir, r, true
}

// openSaved opens a full output saved by this tool. Anything else in the
// output directory is refused: a name saveFull does not give, a symlink
// (the directory's or the file's; never followed), a file that is not
// regular, not ours or linked elsewhere too. shown is the path as given.
func openSaved(shown, dir, name string) (*os.File, error) {
	refuse := func(why string) error {
		return fmt.Errorf("%s: refused: %s; only full outputs pg-tool saved there can be read outside the workspace", shown, why)
	}
	if !savedName(name) {
		return nil, refuse("not a name pg-tool gives its saved outputs")
	}
	dfd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
			return nil, refuse("the output directory is a symlink")
		}
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	defer syscall.Close(dfd)
	fd, err := syscall.Openat(dfd, name, openReadFlags|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		switch {
		case errors.Is(err, syscall.ELOOP):
			return nil, refuse("it is a symlink")
		case errors.Is(err, syscall.ENOENT):
			return nil, missingError(shown)
		case errors.Is(err, syscall.ENXIO):
			return nil, refuse("it is not a regular file")
		}
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	f := os.NewFile(uintptr(fd), shown)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	var why string
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		why = "it is not a regular file"
	case int(st.Uid) != os.Getuid():
		why = "it is not owned by this user"
	case st.Nlink != 1:
		why = "it has other hard links"
	}
	if why != "" {
		f.Close()
		return nil, refuse(why)
	}
	return f, nil
}
