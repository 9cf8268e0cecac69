package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/powerglide/powerglide/pkg/skills"
)

// skillFilesShown caps the files a skill's answer lists.
const skillFilesShown = 50

// skillTool reads a skill's instructions (Options.Skills): the model sees
// the names and descriptions up front and loads a body only when it needs
// it. Its description names the skills, for clients that have no system
// prompt of ours (MCP clients).
func skillTool(list []skills.Skill) *Tool {
	names := strings.Join(skills.Names(list), ", ")
	return &Tool{
		Name: skills.ToolName,
		Description: `Load a skill: its instructions for a kind of work, and the list of files in its folder (scripts, references, templates), which read opens by the absolute paths given.
Call it with the name of a skill whose description matches the task before starting that work. Skills: ` + names + `.`,
		Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "description": "The skill's name, e.g. pdf-forms."}
  },
  "required": ["name"],
  "additionalProperties": false
}`),
		ReadOnly: true,
		Run:      runSkill,
	}
}

func runSkill(ctx context.Context, s *Session, raw json.RawMessage) (string, error) {
	var in struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return "", err
	}
	sk, ok := skills.Find(s.opts.Skills, strings.TrimSpace(in.Name))
	if !ok {
		return "", badInput(fmt.Errorf("unknown skill %q; skills: %s", in.Name, strings.Join(skills.Names(s.opts.Skills), ", ")))
	}
	body, err := sk.Body()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Skill %s\nFolder: %s\n\n%s\n", sk.Name, sk.Dir, body)
	files, more := sk.Files(skillFilesShown)
	if len(files) > 0 {
		fmt.Fprintf(&b, "\n[files in the skill's folder, readable with read by these paths (scripts run with bash from there):]\n")
		for _, f := range files {
			fmt.Fprintf(&b, "%s\n", filepath.Join(sk.Dir, filepath.FromSlash(f)))
		}
		if more > 0 {
			fmt.Fprintf(&b, "[... %d more files]\n", more)
		}
	}
	return b.String(), nil
}

// openSkillFile opens a file of a skill's folder for read: the one place
// outside the workspace root that read reaches. ok is false when p is in
// no skill's folder. The folder is opened as an os.Root, so a symlink or
// ".." inside it cannot lead out of it.
func (s *Session) openSkillFile(p string) (f *os.File, ok bool, err error) {
	if len(s.opts.Skills) == 0 {
		return nil, false, nil
	}
	sk, rel, found := skills.Containing(s.opts.Skills, p)
	if !found {
		return nil, false, nil
	}
	root, err := os.OpenRoot(sk.Dir)
	if err != nil {
		return nil, true, fmt.Errorf("skill %s: %w", sk.Name, err)
	}
	defer root.Close()
	f, err = root.OpenFile(rel, openReadFlags, 0)
	if err != nil {
		if strings.Contains(err.Error(), "path escapes from parent") {
			return nil, true, fmt.Errorf("path %s leads out of skill %s's folder %s (through a symlink): refused", p, sk.Name, sk.Dir)
		}
		return nil, true, s.pathErr(p, err)
	}
	if err := checkRegular(f, p); err != nil {
		f.Close()
		return nil, true, err
	}
	return f, true, nil
}
