package pgtool

import (
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/jq"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/skills"
)

// skills discovers the Agent Skills of the workspace (none with
// --no-skills). A SKILL.md that cannot be used is skipped; its warning is
// kept for the commands that report them (list, skills).
func (c *CLI) skills(rt *cli.Runtime) []skills.Skill {
	if c.NoSkills {
		return nil
	}
	root := c.Root
	if root == "" {
		root = "."
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	roots, warns := skills.Roots(root, rt.IO.Getenv)
	list, more := skills.Discover(roots)
	c.skillWarnings = append(warns, more...)
	return list
}

// warnSkills prints the warnings of discovery on stderr.
func (c *CLI) warnSkills(rt *cli.Runtime) {
	for _, w := range c.skillWarnings {
		fmt.Fprintf(rt.IO.Err, "pg-tool: warning: %v\n", w)
	}
}

// SkillsCmd lists the Agent Skills.
//
//	$ pg-tool skills
//	$ pg-tool skills --jq 'select(.source == "project") | .name' -r
type SkillsCmd struct {
	JSON bool   `help:"Print JSON Lines even on a terminal."`
	Jq   string `help:"Apply a jq filter to each skill record (in-process, gojq); each result is printed as a JSON line." placeholder:"EXPR"`
	Raw  bool   `short:"r" help:"With --jq, print string results as plain text, like jq -r."`
}

// Run prints one record per skill, by name; malformed SKILL.md files are
// reported on stderr (the others are still listed).
func (sc *SkillsCmd) Run(rt *cli.Runtime, c *CLI) error {
	filter, err := jq.New(sc.Jq, sc.Raw, rt.IO.Out, jsonl.NewEncoder(rt.IO.Out))
	if err != nil {
		return err
	}
	list := c.skills(rt)
	c.warnSkills(rt)
	if !filter.Active() && !rt.IO.JSON(sc.JSON) {
		return skillTable(rt, list)
	}
	rt.JSON = true
	for _, s := range list {
		rec := protocol.SkillRecord{Type: "skill", Name: s.Name, Description: s.Description, Path: s.Path, Source: s.Source}
		if err := filter.Emit(rt.Ctx, rec); err != nil {
			return err
		}
	}
	return nil
}

func skillTable(rt *cli.Runtime, list []skills.Skill) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(rt.IO.Out, "no skills (looked in .powerglide/skills and .claude/skills up to the repository root, $XDG_CONFIG_HOME/powerglide/skills and ~/.claude/skills)")
		return err
	}
	tw := tabwriter.NewWriter(rt.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tDESCRIPTION\tPATH")
	for _, s := range list {
		desc := s.Description
		if r := []rune(desc); len(r) > 60 {
			desc = string(r[:59]) + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, s.Source, strings.ReplaceAll(desc, "\t", " "), s.Path)
	}
	return tw.Flush()
}

// Help is the detailed help of the command (--help and the man page).
func (SkillsCmd) Help() string {
	return `An Agent Skill is a folder holding a SKILL.md: YAML front matter with a name (lower-case letters, digits and hyphens) and a description (when to use it), then Markdown instructions; scripts, references and templates may sit beside it. pg-tool looks in .powerglide/skills and .claude/skills of the workspace (--root) and of each directory above it up to the repository root, then in $XDG_CONFIG_HOME/powerglide/skills (default ~/.config) and ~/.claude/skills; a nearer skill wins over one of the same name further away.

The skill tool gives a model a skill's instructions and the list of its files when it asks by name (pg-loop puts the names and descriptions in its system prompt); read opens the files of a skill's folder by their absolute paths, even outside --root, and nothing else outside it. --no-skills turns skills off.

Prints one JSON line per skill, {type:"skill", name, description, path, source} (source: project or user), sorted by name; on a terminal, a table. A SKILL.md whose front matter is missing or malformed (bad YAML, no name, no description) is reported on stderr with its file and line, and skipped.

  $ pg-tool skills
  $ pg-tool skills --jq 'select(.source == "project") | .name' -r
  $ pg-tool call skill '{"name":"release-notes"}'`
}
