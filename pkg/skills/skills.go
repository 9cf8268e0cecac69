// Package skills finds Agent Skills: folders holding a SKILL.md (YAML front
// matter with a name and a description, then a Markdown body) and any files
// beside it. Skills are discovered in .powerglide/skills and .claude/skills
// from the workspace up to the repository root, then in the user's
// $XDG_CONFIG_HOME/powerglide/skills and ~/.claude/skills; a nearer skill
// wins a name clash. Discovery reads only the front matter: the body is read
// when a model asks for the skill (progressive disclosure).
package skills

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"go.yaml.in/yaml/v3"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/internal/lazyre"
	"github.com/powerglide/powerglide/pkg/project"
)

// FileName is the file that makes a folder a skill.
const FileName = "SKILL.md"

// Where a skill came from.
const (
	SourceProject = "project" // under the workspace, up to the repository root
	SourceUser    = "user"    // the user's configuration
)

// Limits of the format (the Agent Skills specification's), and of what
// discovery reads of a SKILL.md.
const (
	MaxNameLen        = 64
	MaxDescriptionLen = 1024
	maxFrontMatter    = 64 << 10
)

// Skill is one discovered skill.
type Skill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Path is the SKILL.md file, absolute; Dir is the folder holding it.
	Path   string `json:"path"`
	Dir    string `json:"-"`
	Source string `json:"source"`
	// bodyLine is the first line of the body in SKILL.md.
	bodyLine int
}

// Warning is a SKILL.md that was skipped or a problem a skill still loaded
// with; Line is 0 when it concerns the whole file.
type Warning struct {
	File string
	Line int
	Msg  string
}

func (w Warning) Error() string {
	if w.Line > 0 {
		return fmt.Sprintf("skill %s:%d: %s", w.File, w.Line, w.Msg)
	}
	return fmt.Sprintf("skill %s: %s", w.File, w.Msg)
}

// Root is a directory whose subfolders are skills.
type Root struct {
	Dir    string
	Source string
}

// Roots lists the skill directories for a workspace, nearest first:
// .powerglide/skills and .claude/skills of each directory from the
// workspace up to the repository root (project.Dirs: without a repository,
// or past a parent another user could change, the workspace alone), then
// $XDG_CONFIG_HOME/powerglide/skills (default ~/.config) and
// ~/.claude/skills. getenv reads HOME and XDG_CONFIG_HOME. The warnings say
// where the walk up stopped early, leaving something out.
func Roots(workspace string, getenv func(string) string) ([]Root, []Warning) {
	var out []Root
	dirs, errs := project.Dirs(workspace)
	var warns []Warning
	for _, err := range errs {
		warns = append(warns, Warning{File: workspace, Msg: err.Error()})
	}
	for _, d := range dirs {
		out = append(out, Root{filepath.Join(d, ".powerglide", "skills"), SourceProject}, Root{filepath.Join(d, ".claude", "skills"), SourceProject})
	}
	home := getenv("HOME")
	cfg := getenv("XDG_CONFIG_HOME")
	if cfg == "" && home != "" {
		cfg = filepath.Join(home, ".config")
	}
	if cfg != "" {
		out = append(out, Root{filepath.Join(cfg, "powerglide", "skills"), SourceUser})
	}
	if home != "" {
		out = append(out, Root{filepath.Join(home, ".claude", "skills"), SourceUser})
	}
	return out, warns
}

// Discover finds the skills under roots, nearest root first: a name already
// found hides a later skill of that name. Skills come sorted by name. A
// SKILL.md that cannot be used is skipped with a warning naming its file
// (and line); discovery goes on.
func Discover(roots []Root) ([]Skill, []Warning) {
	var out []Skill
	var warns []Warning
	seen := map[string]bool{}
	for _, root := range roots {
		entries, err := os.ReadDir(root.Dir)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				warns = append(warns, Warning{File: root.Dir, Msg: err.Error()})
			}
			continue
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			dir := filepath.Join(root.Dir, e.Name())
			if e.Type()&os.ModeSymlink != 0 {
				// A linked skill folder is common (one library, many projects).
				if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
					continue
				}
			} else if !e.IsDir() {
				continue
			}
			file := filepath.Join(dir, FileName)
			sk, ws, err := Load(file)
			warns = append(warns, ws...)
			if err != nil {
				if !errors.Is(err, os.ErrNotExist) {
					warns = append(warns, asWarning(file, err))
				}
				continue
			}
			if seen[sk.Name] {
				continue // a nearer skill has the name
			}
			seen[sk.Name] = true
			sk.Source = root.Source
			out = append(out, sk)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, warns
}

func asWarning(file string, err error) Warning {
	var w Warning
	if errors.As(err, &w) {
		return w
	}
	return Warning{File: file, Msg: err.Error()}
}

var nameRe = lazyre.Compile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Load reads a SKILL.md's front matter. An error is a Warning naming the
// file and line (or an fs error: os.ErrNotExist when there is no SKILL.md).
// The warnings returned beside a skill are problems it loaded with.
func Load(file string) (Skill, []Warning, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return Skill{}, nil, err
	}
	f, err := project.Open(abs)
	if err != nil {
		return Skill{}, nil, refused(abs, err)
	}
	defer f.Close()
	fm, bodyLine, err := readFrontMatter(f, abs)
	if err != nil {
		return Skill{}, nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(fm, &doc); err != nil {
		return Skill{}, nil, yamlWarning(abs, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return Skill{}, nil, Warning{File: abs, Line: 2, Msg: "front matter is not a YAML mapping of keys (name: ..., description: ...)"}
	}
	// Discovery reads name and description; other keys (license,
	// compatibility, metadata, allowed-tools) are allowed.
	var nameNode, descNode yaml.Node
	top := doc.Content[0].Content
	for i := 0; i+1 < len(top); i += 2 {
		switch top[i].Value {
		case "name":
			nameNode = *top[i+1]
		case "description":
			descNode = *top[i+1]
		}
	}
	sk := Skill{Path: abs, Dir: filepath.Dir(abs), bodyLine: bodyLine}
	name, line, err := scalar(abs, "name", nameNode)
	if err != nil {
		return Skill{}, nil, err
	}
	switch {
	case name == "":
		return Skill{}, nil, Warning{File: abs, Line: max(line, 1), Msg: "front matter has no name"}
	case len(name) > MaxNameLen:
		return Skill{}, nil, Warning{File: abs, Line: line, Msg: fmt.Sprintf("name %q is longer than %d characters", name, MaxNameLen)}
	case !nameRe().MatchString(name):
		return Skill{}, nil, Warning{File: abs, Line: line, Msg: fmt.Sprintf("name %q must be lower-case letters, digits and single hyphens (e.g. pdf-forms)", name)}
	}
	sk.Name = name
	desc, dline, err := scalar(abs, "description", descNode)
	if err != nil {
		return Skill{}, nil, err
	}
	if strings.TrimSpace(desc) == "" {
		return Skill{}, nil, Warning{File: abs, Line: max(dline, 1), Msg: "front matter has no description (it tells the model when to use the skill)"}
	}
	sk.Description = strings.Join(strings.Fields(desc), " ")
	var warns []Warning
	if len(sk.Description) > MaxDescriptionLen {
		warns = append(warns, Warning{File: abs, Line: dline, Msg: fmt.Sprintf("description is longer than %d characters: the prompt shows its start", MaxDescriptionLen)})
	}
	if base := filepath.Base(sk.Dir); base != name {
		warns = append(warns, Warning{File: abs, Line: line, Msg: fmt.Sprintf("name %q differs from its folder's name %q; the skill is called %q", name, base, name)})
	}
	return sk, warns, nil
}

// refused makes a SKILL.md that project.Open would not read a warning (a
// missing one stays os.ErrNotExist).
func refused(file string, err error) error {
	var ie *atomicfile.IrregularError
	var ue *project.UntrustedError
	switch {
	case errors.As(err, &ie):
		return Warning{File: file, Msg: ie.Kind + ", not a regular file: refused"}
	case errors.As(err, &ue):
		return Warning{File: file, Msg: ue.Why + ": refused"}
	}
	return err
}

// scalar reads a string key of the front matter, with its line in the file
// (the front matter starts on line 2).
func scalar(file, key string, n yaml.Node) (string, int, error) {
	if n.Kind == 0 {
		return "", 0, nil
	}
	line := n.Line + 1
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float" && n.Tag != "!!bool") {
		return "", line, Warning{File: file, Line: line, Msg: fmt.Sprintf("%s must be a string", key)}
	}
	return strings.TrimSpace(n.Value), line, nil
}

var yamlLineRe = lazyre.Compile(`^yaml: (?:unmarshal errors:\s*)?line (\d+): (.*)$`)

// yamlWarning turns a YAML error into a warning on its line of the file.
func yamlWarning(file string, err error) Warning {
	msg := strings.TrimSpace(err.Error())
	if m := yamlLineRe().FindStringSubmatch(msg); m != nil {
		var n int
		fmt.Sscanf(m[1], "%d", &n)
		return Warning{File: file, Line: n + 1, Msg: "bad YAML front matter: " + m[2]}
	}
	return Warning{File: file, Line: 1, Msg: "bad YAML front matter: " + strings.TrimPrefix(msg, "yaml: ")}
}

// readFrontMatter reads the YAML between a first line "---" and the next
// "---" line, and returns it with the line the body starts on.
func readFrontMatter(r io.Reader, file string) ([]byte, int, error) {
	br := bufio.NewReader(r)
	first, err := br.ReadString('\n')
	if err != nil && err != io.EOF {
		return nil, 0, err
	}
	first = strings.TrimPrefix(first, "\ufeff")
	if strings.TrimRight(first, "\r\n \t") != "---" {
		return nil, 0, Warning{File: file, Line: 1, Msg: `no YAML front matter: SKILL.md must start with a line "---", then name: and description:, then "---"`}
	}
	var fm bytes.Buffer
	line := 1
	for {
		text, err := br.ReadString('\n')
		if text == "" && err != nil {
			if err == io.EOF {
				return nil, 0, Warning{File: file, Line: 1, Msg: `front matter is not closed by a "---" line`}
			}
			return nil, 0, err
		}
		line++
		if t := strings.TrimRight(text, "\r\n \t"); t == "---" || t == "..." {
			return fm.Bytes(), line + 1, nil
		}
		if fm.Len()+len(text) > maxFrontMatter {
			return nil, 0, Warning{File: file, Line: line, Msg: fmt.Sprintf("front matter is longer than %d bytes (or not closed by a \"---\" line)", maxFrontMatter)}
		}
		fm.WriteString(text)
	}
}

// Body reads the skill's instructions: SKILL.md after its front matter.
func (s Skill) Body() (string, error) {
	f, err := project.Open(s.Path)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", s.Name, refused(s.Path, err))
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", s.Name, err)
	}
	text := strings.ReplaceAll(string(b), "\r\n", "\n")
	lines := strings.SplitAfter(text, "\n")
	if s.bodyLine > 1 && s.bodyLine-1 <= len(lines) {
		text = strings.Join(lines[s.bodyLine-1:], "")
	}
	return strings.Trim(text, "\n"), nil
}

// Files lists the files of the skill's folder besides SKILL.md, as paths
// relative to it, up to limit (more reports that there were more).
func (s Skill) Files(limit int) (files []string, more int) {
	_ = filepath.WalkDir(s.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if p != s.Dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(s.Dir, p)
		if rel == FileName || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		if len(files) < limit {
			files = append(files, filepath.ToSlash(rel))
		} else {
			more++
		}
		return nil
	})
	return files, more
}
