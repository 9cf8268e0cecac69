package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// FuzzGrepMatchesLines checks grep against its definition: the lines of a
// file (split at \n, a final \r dropped) that the pattern matches, in
// every output mode, whatever prefilter the pattern gets. Two files, so a
// pattern can match in one and not the other.
func FuzzGrepMatchesLines(f *testing.F) {
	for _, seed := range []struct {
		pattern string
		fold    bool
		a, b    string
	}{
		{`\Ax`, false, "y\nx\n", "x"},
		{`x\z`, false, "x\ny\n", "yx"},
		{`\A\s*x`, false, "a\n  x\n", "b"},
		{`^x`, false, "ax\nx", "b"},
		{`(?-m)^x`, false, "a\nx\n", "x"},
		{`x$`, false, "x\r\ny\n", "ax\r"},
		{`a\sb`, false, "a\nb\n", "a b"},
		{"a\nb", false, "a\nb\n", "ab"},
		{`foo\d`, false, "foo bar\n", "foo1"},
		{`k`, true, "\u212a\n", "K"},
		{`\bx\b`, false, "ax\n x\r\n", "x"},
		{`[^a]`, false, "a\n", "\n\n"},
		{`.`, false, "\xe2\x82\n", ""},
	} {
		f.Add(seed.pattern, seed.fold, []byte(seed.a), []byte(seed.b))
	}
	root := f.TempDir()
	s, err := NewSession(Options{Root: root})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, pattern string, fold bool, a, b []byte) {
		expr := pattern
		if fold {
			expr = "(?i)" + expr
		}
		re, err := regexp.Compile(expr)
		if pattern == "" || err != nil || len(a)+len(b) > 4000 {
			return
		}
		files := map[string][]byte{"a.txt": a, "b.txt": b}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// The definition: per file, the numbers of the matching lines.
		want := map[string][]int{}
		for name, data := range files {
			if isBinary(data[:min(len(data), 8192)]) {
				continue
			}
			lines := strings.Split(string(data), "\n")
			if len(lines) > 0 && lines[len(lines)-1] == "" {
				lines = lines[:len(lines)-1]
			}
			for i, l := range lines {
				if re.MatchString(strings.TrimSuffix(l, "\r")) {
					want[name] = append(want[name], i+1)
				}
			}
		}
		grep := func(mode string) string {
			in, _ := json.Marshal(map[string]any{"pattern": pattern, "ignore_case": fold, "output_mode": mode, "max_results": 5000})
			r := s.Call(context.Background(), protocol.ToolCall{Name: "grep", Input: in})
			if !r.OK {
				t.Fatalf("grep %q (%s): %+v", pattern, mode, r.ToolResult)
			}
			return r.Output
		}
		var wantFiles, wantCounts []string
		for _, name := range []string{"a.txt", "b.txt"} {
			if n := len(want[name]); n > 0 {
				wantFiles = append(wantFiles, name)
				wantCounts = append(wantCounts, fmt.Sprintf("%s:%d", name, n))
			}
		}
		check := func(mode string, got, want []string) {
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("grep %q (ignore_case %v) %s: got %q, want %q\nfiles %q %q", pattern, fold, mode, got, want, a, b)
			}
		}
		check("files_with_matches", outputLines(grep("files_with_matches")), wantFiles)
		check("count", outputLines(grep("count")), wantCounts)
		var gotLines, wantLines []string
		for _, l := range outputLines(grep("content")) {
			// path:n:text; a line's text may hold anything, the number not.
			name, rest, _ := strings.Cut(l, ":")
			n, _, _ := strings.Cut(rest, ":")
			if _, err := strconv.Atoi(n); err != nil || files[name] == nil {
				continue // a continuation of a line holding a \r or a cut marker
			}
			gotLines = append(gotLines, name+":"+n)
		}
		for _, name := range []string{"a.txt", "b.txt"} {
			for _, n := range want[name] {
				wantLines = append(wantLines, fmt.Sprintf("%s:%d", name, n))
			}
		}
		sort.Strings(gotLines)
		sort.Strings(wantLines)
		check("content", gotLines, wantLines)
	})
}

// outputLines is grep's answer without its "no matches" line, one entry a
// line.
func outputLines(out string) []string {
	if strings.HasPrefix(out, "no matches for ") {
		return nil
	}
	var lines []string
	for _, l := range bytes.Split(bytes.TrimSuffix([]byte(out), []byte("\n")), []byte("\n")) {
		lines = append(lines, string(l))
	}
	return lines
}
