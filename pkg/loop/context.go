package loop

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/powerglide/powerglide/pkg/project"
)

// Project context files, read in this order in each directory.
var contextFiles = []string{"AGENTS.md", "CLAUDE.md"}

// Caps on the project context: each file, and all of them together.
const (
	contextFileCap  = 32 << 10
	contextTotalCap = 96 << 10
)

// ProjectContext collects AGENTS.md and CLAUDE.md from workdir up to the
// repository root (project.Dirs: without a repository, or past a parent
// another user could change, workdir alone), outermost first so the
// nearest file has the last word. Each file and the total are capped; what
// is cut is marked. A file that is not read — a link, a named pipe, one
// another user could have written — is a warning naming it, never its
// content.
func ProjectContext(workdir string) (string, []error) {
	dirs, warns := project.Dirs(workdir)
	if len(dirs) == 0 {
		return "", warns
	}
	dir := dirs[0]
	// Nearest first while counting against the cap, so what is dropped
	// is the most distant; then printed outermost first.
	var parts []string
	total := 0
	capped := ""
collect:
	for _, d := range dirs {
		for i := len(contextFiles) - 1; i >= 0; i-- {
			p := filepath.Join(d, contextFiles[i])
			data, size, err := readContextFile(p)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					warns = append(warns, fmt.Errorf("project context: %w", err))
				}
				continue
			}
			if len(strings.TrimSpace(string(data))) == 0 {
				continue
			}
			text := string(data)
			if size > contextFileCap {
				text += fmt.Sprintf("\n[... truncated: %d of %d bytes shown]\n", contextFileCap, size)
			}
			if total+len(text) > contextTotalCap {
				capped = fmt.Sprintf("[project context cap of %d bytes reached: %s and the files above it were left out]\n", contextTotalCap, p)
				break collect
			}
			rel, _ := filepath.Rel(dir, p)
			parts = append(parts, fmt.Sprintf("## %s\n\n%s\n", rel, strings.TrimRight(text, "\n")))
			total += len(text)
		}
	}
	var b strings.Builder
	b.WriteString(capped)
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteString("\n")
		b.WriteString(parts[i])
	}
	return b.String(), warns
}

// readContextFile reads the first contextFileCap bytes of a context file
// (project.Open's checks), and its size.
func readContextFile(p string) ([]byte, int64, error) {
	f, err := project.Open(p)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	data, err := io.ReadAll(io.LimitReader(f, contextFileCap))
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", p, err)
	}
	return data, max(fi.Size(), int64(len(data))), nil
}

// VelocityEnv names the velocity file in the environment of the tools.
const VelocityEnv = "POWERGLIDE_VELOCITY_FILE"

// paceNote tells the model where its velocity file is, so it can slow
// itself down (a rate limit, a long build to wait for) and speed up again.
// The path is named through the tools' environment: the prompt is then the
// same for every worker of a team (a recorded session replays on any).
func paceNote() string {
	return `

# Pace
Your pace is read before each step from the file whose path is in the environment variable ` + VelocityEnv + `: one number, steps per second (1 = a step a second, 0.2 = one every 5 seconds; empty or missing = full speed). You may write it to slow yourself down, for instance while waiting on something that takes time, e.g. with bash: echo 0.2 > "$` + VelocityEnv + `" . Write 0 only to pause until a person changes it.`
}
