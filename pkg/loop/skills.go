package loop

import (
	"strings"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/skills"
)

// discoverSkills starts looking for the Agent Skills of the workdir in the
// background (the tool list, which takes a process, runs meanwhile) and
// returns the function that makes the system prompt's section of them:
// names and descriptions only, the bodies are for the model to load. The
// section is there when the tools offer the skill tool that reads them
// (the default pg-tool does, unless --no-skills). SKILL.md files that
// cannot be used are logged as warnings, and the run goes on.
func (r *Runner) discoverSkills() func(defs []protocol.ToolDef) string {
	if r.o.NoSkills {
		return func([]protocol.ToolDef) string {
			r.log("info", "skills left out (--no-skills)")
			return ""
		}
	}
	type found struct {
		list  []skills.Skill
		warns []skills.Warning
	}
	ch := make(chan found, 1)
	go func() {
		roots, warns := skills.Roots(r.o.Workdir, r.o.Getenv)
		list, more := skills.Discover(roots)
		ch <- found{list, append(warns, more...)}
	}()
	return func(defs []protocol.ToolDef) string {
		f := <-ch
		offered := false
		for _, d := range defs {
			offered = offered || d.Name == skills.ToolName
		}
		if !offered {
			return ""
		}
		for _, w := range f.warns {
			r.log("warn", "%v", w)
		}
		if len(f.list) == 0 {
			return ""
		}
		r.log("info", "%d skills: %s", len(f.list), strings.Join(skills.Names(f.list), ", "))
		return "\n\n" + skills.Prompt(f.list, r.o.SkillsCap)
	}
}
