package loop

import (
	"strings"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/skills"
)

// skillsPrompt is the system prompt's section naming the Agent Skills of
// the workdir, when the tools offer the skill tool that reads them (the
// default pg-tool does, unless --no-skills): names and descriptions only,
// the bodies are for the model to load. SKILL.md files that cannot be used
// are logged as warnings, and the run goes on.
func (r *Runner) skillsPrompt(defs []protocol.ToolDef) string {
	if r.o.NoSkills {
		r.log("info", "skills left out (--no-skills)")
		return ""
	}
	offered := false
	for _, d := range defs {
		offered = offered || d.Name == skills.ToolName
	}
	if !offered {
		return ""
	}
	list, warns := skills.Discover(skills.Roots(r.o.Workdir, r.o.Getenv))
	for _, w := range warns {
		r.log("warn", "%v", w)
	}
	if len(list) == 0 {
		return ""
	}
	r.log("info", "%d skills: %s", len(list), strings.Join(skills.Names(list), ", "))
	return "\n\n" + skills.Prompt(list, r.o.SkillsCap)
}
