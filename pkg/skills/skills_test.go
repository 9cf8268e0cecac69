package skills

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func skillMD(name, desc, body string) string {
	return fmt.Sprintf("---\nname: %s\ndescription: %s\n---\n%s", name, desc, body)
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestRootsOrder(t *testing.T) {
	repo := t.TempDir()
	write(t, filepath.Join(repo, ".git", "HEAD"), "ref: refs/heads/main\n")
	ws := filepath.Join(repo, "sub", "ws")
	got, warns := Roots(ws, env(map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "/xdg"}))
	if len(warns) > 0 {
		t.Errorf("warnings: %v", warns)
	}
	want := []Root{
		{filepath.Join(ws, ".powerglide/skills"), SourceProject},
		{filepath.Join(ws, ".claude/skills"), SourceProject},
		{filepath.Join(repo, "sub/.powerglide/skills"), SourceProject},
		{filepath.Join(repo, "sub/.claude/skills"), SourceProject},
		{filepath.Join(repo, ".powerglide/skills"), SourceProject},
		{filepath.Join(repo, ".claude/skills"), SourceProject},
		{"/xdg/powerglide/skills", SourceUser},
		{"/home/u/.claude/skills", SourceUser},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("roots:\n got %v\nwant %v", got, want)
	}
	// Without XDG_CONFIG_HOME the user's config is ~/.config; without a
	// repository the workspace alone is searched.
	lone := t.TempDir()
	got, _ = Roots(lone, env(map[string]string{"HOME": "/home/u"}))
	if len(got) != 4 || got[2].Dir != "/home/u/.config/powerglide/skills" || got[0].Dir != filepath.Join(lone, ".powerglide/skills") {
		t.Fatalf("roots without a repository or XDG_CONFIG_HOME: %v", got)
	}
}

func TestDiscoverNearerWins(t *testing.T) {
	repo := t.TempDir()
	write(t, filepath.Join(repo, ".git", "HEAD"), "x\n")
	ws := filepath.Join(repo, "app")
	home := t.TempDir()
	write(t, filepath.Join(ws, ".claude/skills/deploy/SKILL.md"), skillMD("deploy", "Deploy the app (workspace copy).", "near\n"))
	write(t, filepath.Join(repo, ".powerglide/skills/deploy/SKILL.md"), skillMD("deploy", "Deploy (repo copy).", "far\n"))
	write(t, filepath.Join(repo, ".powerglide/skills/lint/SKILL.md"), skillMD("lint", "Run the linters.", "lint\n"))
	write(t, filepath.Join(home, ".config/powerglide/skills/lint/SKILL.md"), skillMD("lint", "User lint.", "user\n"))
	write(t, filepath.Join(home, ".claude/skills/notes/SKILL.md"), skillMD("notes", "Write release notes.", "notes\n"))
	write(t, filepath.Join(home, ".claude/skills/not-a-skill/README.md"), "no SKILL.md here\n")
	write(t, filepath.Join(home, ".claude/skills/stray-file.md"), "a file, not a folder\n")

	roots, _ := Roots(ws, env(map[string]string{"HOME": home}))
	list, warns := Discover(roots)
	if len(warns) != 0 {
		t.Fatalf("warnings: %v", warns)
	}
	got := map[string]string{}
	for _, s := range list {
		got[s.Name] = s.Description + " [" + s.Source + "]"
	}
	want := map[string]string{
		"deploy": "Deploy the app (workspace copy). [project]",
		"lint":   "Run the linters. [project]",
		"notes":  "Write release notes. [user]",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("skills:\n got %v\nwant %v", got, want)
	}
	if names := strings.Join(Names(list), ","); names != "deploy,lint,notes" {
		t.Errorf("not sorted by name: %s", names)
	}
	body, err := list[0].Body()
	if err != nil || body != "near" {
		t.Errorf("body of the nearer deploy = %q, %v", body, err)
	}
}

func TestMalformedSkillsAreWarnings(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		folder, text string
		line         int
		msg          string
	}{
		{"no-front", "# just markdown\n", 1, "no YAML front matter"},
		{"unclosed", "---\nname: unclosed\ndescription: x\n", 1, `not closed by a "---" line`},
		{"bad-yaml", "---\nname: bad-yaml\ndescription: a: b\n---\nbody\n", 3, "bad YAML front matter: mapping values are not allowed"},
		{"tab-yaml", "---\nname: tab-yaml\n\tdescription: x\n---\n", 3, "bad YAML front matter: found a tab character"},
		{"no-name", "---\ndescription: has no name\n---\nbody\n", 1, "no name"},
		{"list-name", "---\nname: [a, b]\ndescription: x\n---\n", 2, "name must be a string"},
		{"Bad_Name", "---\nname: Bad_Name\ndescription: x\n---\n", 2, "lower-case letters"},
		{"no-desc", "---\nname: no-desc\n---\n", 1, "no description"},
		{"empty-desc", "---\nname: empty-desc\n\ndescription: \"  \"\n---\n", 4, "no description"},
		{"scalar", "---\njust a string\n---\n", 2, "not a YAML mapping"},
	}
	for _, c := range cases {
		write(t, filepath.Join(dir, c.folder, "SKILL.md"), c.text)
	}
	write(t, filepath.Join(dir, "good", "SKILL.md"), skillMD("good", "The one that works.", "ok\n"))
	list, warns := Discover([]Root{{dir, SourceUser}})
	if len(list) != 1 || list[0].Name != "good" {
		t.Fatalf("want only the good skill, got %v", list)
	}
	byFile := map[string]Warning{}
	for _, w := range warns {
		byFile[filepath.Base(filepath.Dir(w.File))] = w
	}
	for _, c := range cases {
		w, ok := byFile[c.folder]
		if !ok {
			t.Errorf("%s: no warning (warnings: %v)", c.folder, warns)
			continue
		}
		if w.Line != c.line || !strings.Contains(w.Msg, c.msg) {
			t.Errorf("%s: warning %q at line %d, want line %d containing %q", c.folder, w.Msg, w.Line, c.line, c.msg)
		}
		if want := filepath.Join(dir, c.folder, "SKILL.md"); !strings.Contains(w.Error(), want+":") {
			t.Errorf("%s: warning does not name the file: %v", c.folder, w)
		}
	}
}

func TestNameAndFolderMismatchLoadsWithAWarning(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "folder", "SKILL.md"), "---\r\nname: other-name\r\ndescription: >\r\n  Folded\r\n  text.\r\nlicense: MIT\r\n---\r\nBody line\r\n")
	list, warns := Discover([]Root{{dir, SourceUser}})
	if len(list) != 1 || list[0].Name != "other-name" || list[0].Description != "Folded text." {
		t.Fatalf("skills: %+v", list)
	}
	if len(warns) != 1 || warns[0].Line != 2 || !strings.Contains(warns[0].Msg, `differs from its folder's name "folder"`) {
		t.Fatalf("warnings: %v", warns)
	}
	if b, _ := list[0].Body(); b != "Body line" {
		t.Errorf("body = %q", b)
	}
}

func TestPromptCap(t *testing.T) {
	var list []Skill
	for i := range 50 {
		list = append(list, Skill{Name: fmt.Sprintf("skill-%02d", i), Description: strings.Repeat("d", 90)})
	}
	full := Prompt(list, 1<<20)
	if !strings.HasPrefix(full, "# Skills\n") || strings.Count(full, "\n- skill-") != 50 || strings.Contains(full, "cap of") {
		t.Fatalf("uncapped prompt:\n%s", full)
	}
	capped := Prompt(list, 2000)
	if len(capped) > 2000+200 {
		t.Errorf("capped prompt is %d bytes", len(capped))
	}
	n := strings.Count(capped, "\n- skill-")
	if n == 0 || n >= 50 || !strings.Contains(capped, fmt.Sprintf("[skills cap of 2000 bytes reached: %d more skills left out", 50-n)) {
		t.Fatalf("capped prompt has %d skills:\n%s", n, capped)
	}
	long := Prompt([]Skill{{Name: "long", Description: strings.Repeat("é", 1000)}}, 0)
	if !strings.Contains(long, "…\n") || len(long) > 1500 {
		t.Errorf("a long description is not cut: %d bytes", len(long))
	}
	if Prompt(nil, 0) != "" {
		t.Error("a prompt without skills")
	}
}

func TestContaining(t *testing.T) {
	list := []Skill{{Name: "a", Dir: "/s/a"}, {Name: "ab", Dir: "/s/ab"}}
	for _, c := range []struct {
		p, name, rel string
	}{
		{"/s/a/x.md", "a", "x.md"},
		{"/s/ab/scripts/run.sh", "ab", "scripts/run.sh"},
		{"/s/a/../ab/y", "ab", "y"},
		{"/s/abc/x", "", ""},
		{"/s/a", "", ""},
		{"/s/a/../../etc/passwd", "", ""},
		{"s/a/x", "", ""},
	} {
		s, rel, ok := Containing(list, c.p)
		if ok != (c.name != "") || s.Name != c.name || rel != c.rel {
			t.Errorf("Containing(%q) = %q %q %v, want %q %q", c.p, s.Name, rel, ok, c.name, c.rel)
		}
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "x", "SKILL.md"), skillMD("x", "d", ""))
	write(t, filepath.Join(dir, "x", "scripts", "run.sh"), "echo\n")
	write(t, filepath.Join(dir, "x", "ref.md"), "r\n")
	write(t, filepath.Join(dir, "x", ".hidden"), "h\n")
	sk, _, err := Load(filepath.Join(dir, "x", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, more := sk.Files(1)
	if len(files) != 1 || more != 1 {
		t.Errorf("Files(1) = %v, %d more", files, more)
	}
	files, _ = sk.Files(10)
	if strings.Join(files, ",") != "ref.md,scripts/run.sh" {
		t.Errorf("Files = %v", files)
	}
}

// BenchmarkDiscover200 is discovery over 200 skills, the share of
// pg-loop's launch the skills take (the target: at most 20 ms).
func BenchmarkDiscover200(b *testing.B) {
	dir := b.TempDir()
	for i := range 200 {
		name := fmt.Sprintf("skill-%03d", i)
		write(b, filepath.Join(dir, name, "SKILL.md"), skillMD(name, "Use this skill when the task is about topic "+name+"; it explains the steps.", strings.Repeat("Body text of the skill.\n", 200)))
	}
	roots := []Root{{dir, SourceUser}}
	b.ResetTimer()
	for b.Loop() {
		list, _ := Discover(roots)
		if len(list) != 200 {
			b.Fatalf("%d skills", len(list))
		}
		_ = Prompt(list, 0)
	}
}
