package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/powerglide/powerglide/pkg/internal/lazyre"
)

var editTool = &Tool{
	Name:        "edit",
	WritesFiles: true,
	Description: `Replace exact text in a file of the workspace. "old_string" must match the file exactly (whitespace and indentation included; do not include the line-number prefix that read shows) and must occur exactly once, unless "replace_all" is true.
If it is missing or occurs more than once the edit fails and says why; add surrounding lines to make it unique. The file keeps its permissions and line endings (CRLF files stay CRLF).
To create a file, use write.`,
	Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "File to edit, relative to the workspace root."},
    "old_string": {"type": "string", "minLength": 1, "description": "The exact text to replace."},
    "new_string": {"type": "string", "description": "The text to put in its place (must differ from old_string)."},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence instead of requiring exactly one (default false)."}
  },
  "required": ["path", "old_string", "new_string"],
  "additionalProperties": false
}`),
	Run: runEdit,
}

func runEdit(ctx context.Context, s *Session, raw json.RawMessage) (string, error) {
	var in struct {
		Path       string `json:"path"`
		Old        string `json:"old_string"`
		New        string `json:"new_string"`
		ReplaceAll bool   `json:"replace_all"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return "", err
	}
	if in.Old == in.New {
		return "", errors.New("old_string and new_string are the same: nothing to change")
	}
	r, err := s.rel(in.Path)
	if err != nil {
		return "", err
	}
	// Concurrent calls (serve --parallel) must not lose each other's edits.
	unlock := s.lockPath(r)
	defer unlock()
	data, err := s.readRegular(ctx, in.Path, r)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s does not exist; use write to create it", in.Path)
		}
		return "", err
	}
	if isBinary(data[:min(len(data), 8192)]) {
		return "", fmt.Errorf("%s is a binary file; edit only changes text", in.Path)
	}
	content := string(data)
	old, repl := in.Old, in.New
	// A CRLF file: the model writes \n; match and write \r\n.
	crlf := strings.Contains(content, "\r\n") && strings.Count(content, "\r\n") == strings.Count(content, "\n")
	if crlf && !strings.Contains(old, "\r\n") {
		old = strings.ReplaceAll(old, "\n", "\r\n")
		repl = strings.ReplaceAll(strings.ReplaceAll(repl, "\r\n", "\n"), "\n", "\r\n")
	}
	n := strings.Count(content, old)
	switch {
	case n == 0:
		return "", notFound(in.Path, content, in.Old)
	case n > 1 && !in.ReplaceAll:
		return "", fmt.Errorf("old_string occurs %d times in %s (at lines %s); include more surrounding text to make it unique, or set replace_all to true to replace every occurrence",
			n, in.Path, occurrenceLines(content, old, 10))
	}
	var updated string
	if in.ReplaceAll {
		updated = strings.ReplaceAll(content, old, repl)
	} else {
		updated = strings.Replace(content, old, repl, 1)
	}
	firstLine := strings.Count(content[:strings.Index(content, old)], "\n") + 1
	note, err := s.vetoed(ctx, r, in.Path, func() error {
		return s.writeFile(r, in.Path, []byte(updated), 0o644)
	})
	if err != nil {
		return "", err
	}
	what := "1 occurrence"
	if n > 1 {
		what = fmt.Sprintf("%d occurrences", n)
	}
	return fmt.Sprintf("edited %s: replaced %s (first at line %d)\n%s", display(r), what, firstLine, note), nil
}

// notFound explains a missing old_string, pointing at a near match when
// the only difference is whitespace.
func notFound(p, content, old string) error {
	msg := fmt.Sprintf("old_string was not found in %s; it must match exactly, including whitespace and indentation (read the file again to copy the text)", p)
	first := strings.TrimSpace(strings.SplitN(strings.TrimSpace(old), "\n", 2)[0])
	if first != "" {
		for i, line := range strings.Split(content, "\n") {
			if strings.Contains(strings.Join(strings.Fields(line), " "), strings.Join(strings.Fields(first), " ")) {
				msg += fmt.Sprintf("; the first line of old_string nearly matches line %d: %q", i+1, strings.TrimRight(line, "\r"))
				break
			}
		}
	}
	return errors.New(msg)
}

func occurrenceLines(content, old string, max int) string {
	var lines []string
	off := 0
	for len(lines) < max {
		i := strings.Index(content[off:], old)
		if i < 0 {
			break
		}
		lines = append(lines, fmt.Sprint(strings.Count(content[:off+i], "\n")+1))
		off += i + len(old)
	}
	if strings.Count(content, old) > max {
		lines = append(lines, "...")
	}
	return strings.Join(lines, ", ")
}

// vetoed applies a change under the edit veto: with --verify set, the
// verify command runs before and after. When it passed before and fails
// after, the file is restored and the verifier's output is the error. When
// it already failed before, the change is rolled back only if the check now
// reports failure lines it did not report before (see failureLines): old
// failures do not block a change, new ones do.
func (s *Session) vetoed(ctx context.Context, r, shown string, apply func() error) (string, error) {
	if s.opts.Verify == "" {
		return "", apply()
	}
	// One change at a time: concurrent edits would blur who broke the check.
	s.verifyMu.Lock()
	defer s.verifyMu.Unlock()
	before, beforeOut, err := s.verify(ctx)
	if err != nil {
		return "", fmt.Errorf("verify command before the edit: %w", err)
	}
	prev, readErr := s.readRegular(ctx, shown, r)
	existed := readErr == nil
	if readErr != nil && !errors.Is(readErr, fs.ErrNotExist) {
		return "", readErr
	}
	created := s.missingDirs(r)
	if err := apply(); err != nil {
		return "", err
	}
	after, afterOut, err := s.verify(ctx)
	if err != nil {
		return "", fmt.Errorf("verify command after the edit: %w", err)
	}
	var msg string
	switch {
	case after:
		if !before {
			return "[verify: " + s.opts.Verify + " passes now; it failed before this change]\n", nil
		}
		return "[verify: " + s.opts.Verify + " passes]\n", nil
	case before:
		msg = fmt.Sprintf("change to %s rolled back: it makes the verify command %q fail (it passed before)\n%s", shown, s.opts.Verify, strings.TrimRight(afterOut, "\n"))
	default:
		fresh := newFailures(beforeOut, afterOut)
		if len(fresh) == 0 {
			return fmt.Sprintf("[verify: %s still fails, as it did before this change; the change was kept]\n", s.opts.Verify), nil
		}
		msg = fmt.Sprintf("change to %s rolled back: the verify command %q failed before it, but it adds these failures:\n%s\n[full output of the verify command after the change:]\n%s",
			shown, s.opts.Verify, strings.Join(fresh, "\n"), strings.TrimRight(afterOut, "\n"))
	}
	// Newly broken: roll back.
	var rbErr error
	if existed {
		rbErr = s.writeFile(r, shown, prev, 0o644)
	} else {
		rbErr = s.root.Remove(r)
		for i := len(created) - 1; i >= 0; i-- {
			_ = s.root.Remove(created[i])
		}
	}
	if rbErr != nil {
		msg += fmt.Sprintf("\nROLLBACK FAILED: %v", rbErr)
	}
	return "", errors.New(msg)
}

var (
	// Parts of a check's output that change from run to run, or shift when
	// an edit moves lines, without being a different failure.
	durationRe = lazyre.Compile(`\b\d+(\.\d+)?(ns|µs|us|ms|s|m|h)\b`)
	tempPathRe = lazyre.Compile(`(/tmp|/var/tmp|/private/var/folders)/\S*`)
	hexRe      = lazyre.Compile(`\b0x[0-9a-fA-F]+\b`)
	numberRe   = lazyre.Compile(`\b\d+\b`)
	// Lines that report success or progress in a failing run (go test's
	// "ok pkg", "--- PASS", "=== RUN"): a fix makes them appear, and that
	// is no new failure.
	passLineRe = lazyre.Compile(`^(ok\s|PASS$|--- PASS|--- SKIP|=== (RUN|PAUSE|CONT|NAME)|\?\s)`)
)

// failureLines is the set of normalised lines of a failing check's output.
// Line and column numbers, durations, temporary paths and addresses become
// placeholders: an edit that shifts "main.go:12:3: undefined: x" to line 14
// leaves the same failure.
func failureLines(out string) map[string]bool {
	set := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if key := failureKey(line); key != "" {
			set[key] = true
		}
	}
	return set
}

func failureKey(line string) string {
	line = strings.TrimSpace(line)
	if line == "" || passLineRe().MatchString(line) {
		return ""
	}
	line = tempPathRe().ReplaceAllString(line, "TMP")
	line = durationRe().ReplaceAllString(line, "DUR")
	line = hexRe().ReplaceAllString(line, "0xADDR")
	return numberRe().ReplaceAllString(line, "N")
}

// newFailures lists the lines of after (as printed) whose normalised form
// was not in before's output.
func newFailures(before, after string) []string {
	old := failureLines(before)
	var fresh []string
	seen := map[string]bool{}
	for _, line := range strings.Split(after, "\n") {
		key := failureKey(line)
		if key == "" || old[key] || seen[key] {
			continue
		}
		seen[key] = true
		fresh = append(fresh, strings.TrimRight(line, "\r"))
	}
	return fresh
}

// missingDirs lists the parent directories of r that do not exist yet, outermost first.
func (s *Session) missingDirs(r string) []string {
	var out []string
	for d := filepath.Dir(r); d != "." && d != "/"; d = filepath.Dir(d) {
		if _, err := s.root.Stat(d); err == nil {
			break
		}
		out = append([]string{d}, out...)
	}
	return out
}

// verify runs the verify command in the root: passed, combined output.
func (s *Session) verify(ctx context.Context) (bool, string, error) {
	var out bytes.Buffer
	lb := &lockedBuffer{}
	code, err := s.runGroup(ctx, run{timeout: s.opts.VerifyTimeout, dir: s.rootPath, env: s.env(), stdout: lb, stderr: lb}, "bash", "-c", s.opts.Verify)
	out.WriteString(lb.String())
	if errors.Is(err, errTimeout) {
		return false, out.String() + fmt.Sprintf("[verify timed out after %s]\n", s.opts.VerifyTimeout), nil
	}
	if err != nil {
		return false, out.String(), err
	}
	if code != 0 {
		return false, out.String() + fmt.Sprintf("[verify exit code: %d]\n", code), nil
	}
	return true, out.String(), nil
}
