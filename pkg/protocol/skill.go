package protocol

// SkillRecord is one Agent Skill as `pg-tool skills` lists it.
type SkillRecord struct {
	Type        string `json:"type" jsonschema:"enum=skill"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Path        string `json:"path" jsonschema:"description=the skill's SKILL.md\\, absolute; the files beside it are the skill's"`
	Source      string `json:"source" jsonschema:"enum=project,enum=user,description=project: under the workspace up to the repository root (.powerglide/skills or .claude/skills); user: $XDG_CONFIG_HOME/powerglide/skills or ~/.claude/skills"`
}
