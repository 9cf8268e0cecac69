package tool

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/sandbox"
)

func TestIgnoreRules(t *testing.T) {
	set, notes := parseIgnore(".", ".gitignore", []byte("# comment\n*.log\n!keep.log\n/top.txt\nbuild/\ndocs/**/*.tmp\n\\#hash\nfoo?\n[ab].c\n"+
		"[]x]y\n[[:digit:]]*.bak\n{a,b}.txt\nvendor/**\n!vendor/keep\nnested/dir/\n"))
	if len(notes) != 0 {
		t.Fatalf("notes %q", notes)
	}
	ig := &ignorer{sets: []*ignoreSet{set}}
	cases := []struct {
		path  string
		dir   bool
		match bool
	}{
		{"a.log", false, true},
		{"deep/dir/a.log", false, true},
		{"keep.log", false, false},
		{"top.txt", false, true},
		{"sub/top.txt", false, false},
		{"build", true, true},
		{"build", false, false},
		{"x/build", true, true},
		{"docs/a/b/c.tmp", false, true},
		{"docs/c.tmp", false, true},
		{"other/c.tmp", false, false},
		{"#hash", false, true},
		{"food", false, true},
		{"foo", false, false},
		{"a.c", false, true},
		{"c.c", false, false},
		// A ] first in a class is a member; named classes; braces are
		// literal in git's patterns.
		{"]y", false, true},
		{"xy", false, true},
		{"zy", false, false},
		{"7a.bak", false, true},
		{"x.bak", false, false},
		{"{a,b}.txt", false, true},
		{"a.txt", false, false},
		// dir/** is what is inside dir, not dir: a negation below it works.
		{"vendor", true, false},
		{"vendor/x", false, true},
		{"vendor/a/b", false, true},
		{"vendor/keep", false, false},
		// A slash in the middle anchors, a final one means directories.
		{"nested/dir", true, true},
		{"a/nested/dir", true, false},
		{"nested/dir", false, false},
	}
	for _, c := range cases {
		if got := ig.ignored(c.path, c.dir); got != c.match {
			t.Errorf("ignored(%q, dir=%v) = %v, want %v", c.path, c.dir, got, c.match)
		}
	}
	// A nested file's rules apply below it only, and win over the root's.
	nested, _ := parseIgnore("sub", "sub/.gitignore", []byte("!*.log\nlocal\n"))
	ig.sets = append(ig.sets, nested)
	if ig.ignored("sub/x.log", false) || !ig.ignored("other/x.log", false) || !ig.ignored("sub/local", false) || ig.ignored("local", false) {
		t.Error("nested .gitignore rules misapplied")
	}
}

// A line that is no valid pattern is reported with its file and number;
// the lines around it still apply.
func TestIgnoreBadLine(t *testing.T) {
	set, notes := parseIgnore("sub", "sub/.gitignore", []byte("*.log\n[z\n[[:nope:]]\n*.tmp\n"))
	if len(notes) != 2 || !strings.Contains(notes[0], `sub/.gitignore line 2 is not applied: bad pattern "[z": unclosed [`) ||
		!strings.Contains(notes[1], "line 3") || !strings.Contains(notes[1], "unknown character class [:nope:]") {
		t.Fatalf("notes %q", notes)
	}
	ig := &ignorer{sets: []*ignoreSet{set}}
	if !ig.ignored("sub/a.log", false) || !ig.ignored("sub/a.tmp", false) {
		t.Error("the good lines were not applied")
	}
}

func TestGlob(t *testing.T) {
	cases := []struct {
		glob, path string
		match      bool
	}{
		{"*.go", "a.go", true},
		{"*.go", "x/a.go", false},
		{"**/*.go", "a.go", true},
		{"**/*.go", "x/y/a.go", true},
		{"src/**", "src/a/b", true},
		{"src/**/t_*.py", "src/t_a.py", true},
		{"src/**/t_*.py", "src/x/y/t_a.py", true},
		{"a?c", "abc", true},
		{"a?c", "a/c", false},
		{"[!x]y", "zy", true},
		{"[!x]y", "xy", false},
		{"a.b", "axb", false},
		{"**/*.{go,md}", "x/a.md", true},
		{"**/*.{go,md}", "a.go", true},
		{"**/*.{go,md}", "a.txt", false},
		{"f[[:digit:]].txt", "f7.txt", true},
		{"f[[:digit:]].txt", "fd.txt", false},
		{"f[[:digit:]].txt", "f:.txt", false},
		{"f[![:digit:]x].txt", "fa.txt", true},
		{"f[![:digit:]x].txt", "fx.txt", false},
		{"[]a]b", "]b", true},
		{"[]a]b", "ab", true},
		{"[]a]b", "cb", false},
		{"[a-c]", "b", true},
		{"[a-c]", "-", false},
		{"[a-]", "-", true},
		{"[[:a]", ":", true},
		{`[\]-\^]`, "^", true},
		{`\[x\]`, "[x]", true},
		{`\{a,b\}`, "{a,b}", true},
	}
	for _, c := range cases {
		g, err := compileGlob("pattern", c.glob, false)
		if err != nil {
			t.Fatalf("glob %q: %v", c.glob, err)
		}
		if got := g.match(c.path); got != c.match {
			t.Errorf("glob %q (%s) on %q = %v, want %v", c.glob, g.pattern, c.path, got, c.match)
		}
	}
	for _, bad := range []string{"[", "[]", "a{b", "a}", `x\`, "[[:nope:]]", "[z-a]"} {
		if _, err := compileGlob("pattern", bad, false); err == nil || !strings.Contains(err.Error(), "field pattern: bad glob") {
			t.Errorf("glob %q: err %v, want a bad glob naming the field", bad, err)
		}
	}
}

func TestCapOutput(t *testing.T) {
	dir := t.TempDir()
	s, err := NewSession(Options{Root: t.TempDir(), MaxOutput: 1000, OutputDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b strings.Builder
	for i := 0; b.Len() < 50000; i++ {
		b.WriteString("línea ") // multi-byte runes must not be split
		b.WriteString(strings.Repeat("x", i%50))
		b.WriteString("\n")
	}
	full := b.String()
	out, trunc, file := s.capOutput(protocol.ToolCall{Name: "bash"}, full, "output")
	if !trunc || file == "" {
		t.Fatalf("not truncated: %v %q", trunc, file)
	}
	if n := utf8.RuneCountInString(out); n > 1000+100 || n < 500 {
		t.Errorf("capped output has %d characters, want about 1000", n)
	}
	if !utf8.ValidString(out) {
		t.Error("capped output is not valid UTF-8")
	}
	if !strings.HasPrefix(full, strings.SplitN(out, "\n\n[...", 2)[0]) || !strings.HasSuffix(full, out[strings.LastIndex(out, "...]\n\n")+6:]) {
		t.Error("head or tail not kept")
	}
	if !strings.Contains(out, file) {
		t.Error("marker does not name the file")
	}
	saved, err := os.ReadFile(file)
	if err != nil || string(saved) != full {
		t.Fatalf("saved output differs: %v", err)
	}
	if filepath.Dir(file) != dir {
		t.Errorf("saved in %s, want %s", filepath.Dir(file), dir)
	}
}

func TestSchemasAreValidAndStrict(t *testing.T) {
	for _, tl := range builtinTools() {
		var doc map[string]any
		if err := json.Unmarshal(tl.Schema, &doc); err != nil {
			t.Fatalf("%s: schema is not JSON: %v", tl.Name, err)
		}
		if doc["type"] != "object" || doc["additionalProperties"] != false {
			t.Errorf("%s: schema must be a closed object", tl.Name)
		}
		if err := tl.validate(json.RawMessage(`{"no_such_field":1}`)); err == nil || !strings.Contains(err.Error(), `unknown field "no_such_field"`) {
			t.Errorf("%s: unknown field not reported by name: %v", tl.Name, err)
		}
		if tl.Description == "" || len(tl.Description) < 40 {
			t.Errorf("%s: description too thin", tl.Name)
		}
	}
}

func TestEditKeepsLoneLFInMixedFile(t *testing.T) {
	root := t.TempDir()
	// Mixed endings are left as they are: only pure CRLF files get CRLF.
	if err := os.WriteFile(filepath.Join(root, "m.txt"), []byte("a\r\nb\nc\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.Call(context.Background(), protocol.ToolCall{Name: "edit", Input: []byte(`{"path":"m.txt","old_string":"b\n","new_string":"B\n"}`)})
	if !r.OK {
		t.Fatalf("%+v", r.ToolResult)
	}
	got, _ := os.ReadFile(filepath.Join(root, "m.txt"))
	if string(got) != "a\r\nB\nc\r\n" {
		t.Errorf("got %q", got)
	}
	fi, _ := os.Stat(filepath.Join(root, "m.txt"))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestRequiredLiteral(t *testing.T) {
	cases := []struct {
		expr string
		lit  string
		fold bool
	}{
		{`func \w+Reader\(`, "Reader(", false},
		{`(?i)deadline exceeded`, "deadline exceeded", true},
		{`a|b`, "", false},
		{`(?i)straße`, "", false},
		{`x.*longer_literal`, "longer_literal", false},
	}
	for _, c := range cases {
		lit, fold := requiredLiteral(c.expr)
		if string(lit) != c.lit || (lit != nil && fold != c.fold) {
			t.Errorf("requiredLiteral(%q) = %q, %v; want %q, %v", c.expr, lit, fold, c.lit, c.fold)
		}
	}
	var scratch []byte
	if !containsLit([]byte("a DeadLine Exceeded b"), []byte("deadline exceeded"), true, &scratch) {
		t.Error("fold match missed")
	}
	if containsLit([]byte("a deadline b"), []byte("deadline exceeded"), true, &scratch) {
		t.Error("false match")
	}
	// The Kelvin sign folds to k: the prefilter must not hide such a file.
	if !containsLit([]byte("\u212Aey"), []byte("key"), true, &scratch) {
		t.Error("Kelvin sign file filtered out")
	}
}

func TestRootThroughSymlink(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "a.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(Options{Root: link})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{filepath.Join(link, "a.txt"), filepath.Join(real, "a.txt"), "a.txt"} {
		r := s.Call(context.Background(), protocol.ToolCall{Name: "read", Input: []byte(`{"path":"` + p + `"}`)})
		if !r.OK || r.Output != "     1\thi\n" {
			t.Errorf("read %s: %+v", p, r.ToolResult)
		}
	}
	r := s.Call(context.Background(), protocol.ToolCall{Name: "read", Input: []byte(`{"path":"` + filepath.Join(link, "..", "x") + `"}`)})
	if r.OK || !strings.Contains(*r.Error, "outside the workspace root") {
		t.Errorf("escape through the alias: %+v", r.ToolResult)
	}
}

// glob orders by modification time also when the root is not the working
// directory (entries' Info must stat inside the root).
func TestGlobNewestFirstElsewhere(t *testing.T) {
	root := t.TempDir()
	for i, name := range []string{"a/old.go", "a/b/new.go", "mid.go"} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.Date(2020+[]int{0, 4, 2}[i], 1, 1, 0, 0, 0, 0, time.UTC)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewSession(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.Call(context.Background(), protocol.ToolCall{Name: "glob", Input: []byte(`{"pattern":"**/*.go"}`)})
	if !r.OK || r.Output != "a/b/new.go\nmid.go\na/old.go\n" {
		t.Fatalf("%+v", r.ToolResult)
	}
}

func TestNewFailures(t *testing.T) {
	for _, tc := range []struct {
		name, before, after string
		want                []string
	}{
		{"line shift", "./a.go:3:17: undefined: x\n", "./a.go:5:2: undefined: x\n", nil},
		{"new message", "./a.go:3:17: undefined: x\n", "./a.go:3:17: undefined: x\n./b.go:4:1: undefined: y\n", []string{"./b.go:4:1: undefined: y"}},
		{"volatile", "--- FAIL: TestA (0.01s)\nFAIL\tex.com/a\t0.123s\n/tmp/go-build123/x: exit status 1\n",
			"--- FAIL: TestA (1.50s)\nFAIL\tex.com/a\t2s\n/tmp/go-build987/x: exit status 1\n", nil},
		{"a fix adds ok lines", "FAIL\tex.com/a\t0.1s\nFAIL\tex.com/b\t0.1s\n", "ok  \tex.com/a\t0.1s\nFAIL\tex.com/b\t0.1s\n", nil},
		{"new test", "--- FAIL: TestA (0.01s)\n", "--- FAIL: TestA (0.01s)\n--- FAIL: TestB (0.01s)\n", []string{"--- FAIL: TestB (0.01s)"}},
		{"timeout", "x fails\n[verify exit code: 1]\n", "x fails\n[verify timed out after 5m0s]\n", []string{"[verify timed out after 5m0s]"}},
	} {
		got := newFailures(tc.before, tc.after)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestReadOnlySandboxWithholdsFileWriters: write and edit change files
// from pg-tool itself, where no sandbox reaches, so --sandbox read-only
// neither offers them nor runs them; the tools that run programs stay
// (their programs run in the sandbox).
func TestReadOnlySandboxWithholdsFileWriters(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.ReadOnly, sandbox.WorkspaceWrite} {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "f.txt"), []byte("orig\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		sb, err := sandbox.New(sandbox.Policy{Mode: mode, Root: root, Home: os.Getenv("HOME")})
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSession(Options{Root: root, Sandbox: sb})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		tools, err := s.Tools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		offered := map[string]bool{}
		for _, tl := range tools {
			offered[tl.Name] = true
		}
		readOnly := mode == sandbox.ReadOnly
		if offered["write"] == readOnly || offered["edit"] == readOnly || !offered["bash"] || !offered["term_start"] || !offered["read"] {
			t.Errorf("%s offers %v", mode, slices.Sorted(maps.Keys(offered)))
		}
		for _, c := range []protocol.ToolCall{
			{Name: "write", Input: []byte(`{"path":"f.txt","content":"written\n"}`)},
			{Name: "edit", Input: []byte(`{"path":"f.txt","old_string":"written","new_string":"edited"}`)},
		} {
			r := s.Call(ctx, c)
			if !readOnly {
				if !r.OK {
					t.Errorf("%s %s: %s", mode, c.Name, *r.Error)
				}
				continue
			}
			if r.OK || r.Kind != KindUnknownTool || !strings.Contains(*r.Error, c.Name+" is not available under --sandbox read-only") {
				t.Errorf("%s %s: %+v (kind %q)", mode, c.Name, r.ToolResult, r.Kind)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(root, "f.txt")); readOnly && string(b) != "orig\n" {
			t.Errorf("read-only: f.txt is now %q", b)
		}
	}
}
