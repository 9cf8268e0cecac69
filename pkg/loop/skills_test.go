package loop

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// skillTools offers the skill tool besides echo, as pg-tool does when it
// found skills.
type skillTools struct{ funcTools }

func (t *skillTools) List(context.Context) ([]protocol.ToolDef, error) {
	return []protocol.ToolDef{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}, {Name: "skill", InputSchema: json.RawMessage(`{"type":"object"}`)}}, nil
}

func TestSystemPromptNamesSkills(t *testing.T) {
	home := t.TempDir()
	write := func(p, text string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, ".claude/skills/pdf-forms/SKILL.md"), "---\nname: pdf-forms\ndescription: Fill in PDF forms with the scripts here.\n---\nSecret body text.\n")
	write(filepath.Join(home, ".claude/skills/broken/SKILL.md"), "---\ndescription: no name\n---\n")
	getenv := func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
	for _, c := range []struct {
		name     string
		tools    Tools
		noSkills bool
		want     bool
	}{
		{"offered", &skillTools{*okTool("x")}, false, true},
		{"no skill tool", okTool("x"), false, false},
		{"--no-skills", &skillTools{*okTool("x")}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			llm := &scriptLLM{answers: []func(*protocol.Request) (*protocol.EndEvent, error){say("done")}}
			h := newHarness(t, llm, c.tools, "task")
			h.opts.Getenv, h.opts.NoSkills = getenv, c.noSkills
			if res := h.run(t); res.State != Done {
				t.Fatalf("result %+v\n%s", res, h.out.String())
			}
			sys := llm.reqs[0].System
			has := strings.Contains(sys, "# Skills\n") && strings.Contains(sys, "- pdf-forms: Fill in PDF forms with the scripts here.\n")
			if has != c.want {
				t.Fatalf("skills in the system prompt: %v, want %v\n%s", has, c.want, sys)
			}
			if strings.Contains(sys, "Secret body text") {
				t.Errorf("the body is in the system prompt")
			}
			warned := strings.Contains(h.out.String(), `broken/SKILL.md:1: front matter has no name`)
			if warned != c.want {
				t.Errorf("warning for the broken skill: %v, want %v\n%s", warned, c.want, h.out.String())
			}
		})
	}
}
