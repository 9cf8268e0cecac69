package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/skills"
)

// skillSession is a session whose workspace holds secret.txt's sibling
// files, with one user skill outside the root.
func skillSession(t *testing.T) (s *Session, root, skillDir, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "ws")
	skillDir = filepath.Join(base, "home", ".claude", "skills", "release-notes")
	outside = filepath.Join(base, "home", "secret.txt")
	for p, text := range map[string]string{
		filepath.Join(root, "main.go"):                     "package main\n",
		filepath.Join(skillDir, "SKILL.md"):                "---\nname: release-notes\ndescription: Write release notes from git log.\n---\n# Release notes\nRun scripts/notes.sh, then fill template.md.\n",
		filepath.Join(skillDir, "scripts", "notes.sh"):     "#!/bin/sh\ngit log --oneline\n",
		filepath.Join(skillDir, "template.md"):             "## Changes\n",
		outside:                                            "not for the model\n",
		filepath.Join(base, "home", ".claude", "x", "y"):   "no skill\n",
		filepath.Join(base, "home", ".claude", "skills-x"): "sibling with a common prefix\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A link inside the skill's folder that leads out of it.
	if err := os.Symlink(outside, filepath.Join(skillDir, "leak.txt")); err != nil {
		t.Fatal(err)
	}
	list, warns := skills.Discover([]skills.Root{{Dir: filepath.Dir(skillDir), Source: skills.SourceUser}})
	if len(list) != 1 || len(warns) != 0 {
		t.Fatalf("discover: %v %v", list, warns)
	}
	s, err := NewSession(Options{Root: root, Skills: list})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, root, skillDir, outside
}

func call(t *testing.T, s *Session, name string, input any) Outcome {
	t.Helper()
	b, _ := json.Marshal(input)
	return s.Call(context.Background(), protocol.ToolCall{ID: "1", Name: name, Input: b})
}

func TestSkillToolLoadsTheBody(t *testing.T) {
	s, _, dir, _ := skillSession(t)
	tools, _ := s.Tools(context.Background())
	var def *Tool
	for _, tl := range tools {
		if tl.Name == "skill" {
			def = tl
		}
	}
	if def == nil || !strings.Contains(def.Description, "Skills: release-notes.") {
		t.Fatalf("no skill tool naming the skill: %+v", def)
	}
	res := call(t, s, "skill", map[string]string{"name": "release-notes"})
	if !res.OK {
		t.Fatalf("skill: %v", *res.Error)
	}
	for _, want := range []string{"# Skill release-notes\nFolder: " + dir, "Run scripts/notes.sh, then fill template.md.", filepath.Join(dir, "scripts", "notes.sh") + "\n", filepath.Join(dir, "template.md") + "\n"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("skill output lacks %q:\n%s", want, res.Output)
		}
	}
	if strings.Contains(res.Output, "name: release-notes") {
		t.Errorf("the front matter is part of the body:\n%s", res.Output)
	}
	res = call(t, s, "skill", map[string]string{"name": "nope"})
	if res.OK || res.Kind != KindBadInput || !strings.Contains(*res.Error, `unknown skill "nope"; skills: release-notes`) {
		t.Errorf("unknown skill: %+v", res)
	}
}

func TestReadReachesSkillFilesOnly(t *testing.T) {
	s, root, dir, outside := skillSession(t)
	res := call(t, s, "read", map[string]string{"path": filepath.Join(dir, "scripts", "notes.sh")})
	if !res.OK || !strings.Contains(res.Output, "git log --oneline") {
		t.Fatalf("read of a skill file: %+v", res)
	}
	// The same file by a path relative to the root.
	rel, _ := filepath.Rel(root, filepath.Join(dir, "template.md"))
	if res := call(t, s, "read", map[string]string{"path": rel}); !res.OK || !strings.Contains(res.Output, "## Changes") {
		t.Fatalf("read of a skill file by a relative path: %+v", res)
	}
	for _, p := range []string{
		outside,                                  // beside the skills
		filepath.Join(dir, "leak.txt"),           // a link out of the folder
		filepath.Join(dir, "..", "..", "x", "y"), // .. out of it
		filepath.Dir(dir) + "-x",                 // a sibling sharing the prefix
		filepath.Dir(dir),                        // the skills directory itself
	} {
		res := call(t, s, "read", map[string]string{"path": p})
		if res.OK {
			t.Errorf("read %s: allowed, output %q", p, res.Output)
			continue
		}
		if strings.Contains(res.Output, "not for the model") {
			t.Errorf("read %s leaked the file", p)
		}
	}
	// write and edit stay in the root.
	if res := call(t, s, "write", map[string]string{"path": filepath.Join(dir, "template.md"), "content": "x"}); res.OK {
		t.Error("write reached a skill's folder")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "template.md")); string(b) != "## Changes\n" {
		t.Errorf("template.md changed: %q", b)
	}
}

func TestNoSkillsNoTool(t *testing.T) {
	root := t.TempDir()
	s, err := NewSession(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if res := call(t, s, "skill", map[string]string{"name": "x"}); res.OK || res.Kind != KindUnknownTool {
		t.Errorf("skill tool without skills: %+v", res)
	}
}
