package skills

import (
	"fmt"
	"path/filepath"
	"strings"
)

// PromptCap is the most bytes the skills section of a system prompt takes;
// the skills past it are left out with a note, as for AGENTS.md.
const PromptCap = 16 << 10

// ToolName is the name of the tool that reads a skill.
const ToolName = "skill"

// Prompt is the section of a system prompt that names the skills and says
// when to use each (their descriptions, each cut at MaxDescriptionLen), up
// to limit bytes (0: PromptCap). It is empty without skills.
func Prompt(list []Skill, limit int) string {
	if len(list) == 0 {
		return ""
	}
	if limit <= 0 {
		limit = PromptCap
	}
	var b strings.Builder
	b.WriteString("# Skills\n")
	b.WriteString("Skills are folders of instructions, scripts and resources for particular kinds of work. When a task matches a skill's description, call the " + ToolName + " tool with its name first and follow what it says; the files it mentions are in its folder, readable with read by the absolute paths it gives.\n\n")
	for i, s := range list {
		line := fmt.Sprintf("- %s: %s\n", s.Name, clip(s.Description, MaxDescriptionLen))
		if b.Len()+len(line) > limit {
			fmt.Fprintf(&b, "[skills cap of %d bytes reached: %d more skills left out; the %s tool names them all when given a name it does not know]\n", limit, len(list)-i, ToolName)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// Names lists the skills' names.
func Names(list []Skill) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.Name
	}
	return out
}

// Find returns the skill of that name.
func Find(list []Skill, name string) (Skill, bool) {
	for _, s := range list {
		if s.Name == name {
			return s, true
		}
	}
	return Skill{}, false
}

// Containing returns the skill whose folder holds the absolute path p and
// p relative to it.
// The path is compared lexically, to the folder as found and to the folder
// with its symlinks resolved; a symlink inside the folder is for the
// caller to refuse when it leads out (os.Root does).
func Containing(list []Skill, p string) (Skill, string, bool) {
	if !filepath.IsAbs(p) {
		return Skill{}, "", false
	}
	p = filepath.Clean(p)
	for _, s := range list {
		if rel, ok := within(s.Dir, p); ok {
			return s, rel, true
		}
	}
	for _, s := range list {
		if real, err := filepath.EvalSymlinks(s.Dir); err == nil && real != s.Dir {
			if rel, ok := within(real, p); ok {
				return s, rel, true
			}
		}
	}
	return Skill{}, "", false
}

// within reports p (clean, absolute) relative to dir when it is below it.
func within(dir, p string) (string, bool) {
	if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
		return "", false
	}
	return p[len(dir)+1:], true
}
