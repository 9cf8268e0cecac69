package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/powerglide/powerglide/pkg/atomicfile"
)

// Repo is the git repository --commit commits to, opened before the model
// runs. The model's tools write the work tree and, in the usual layout,
// .git itself: a hook, core.fsmonitor or a filter planted there would run
// outside the sandbox with the next git command. So every git command
// names the git dir and the work tree found at the start (a .git file
// rewritten to point elsewhere is not followed), runs with hooks,
// fsmonitor and the untracked cache off, submodules ignored, and the
// tools' environment (no secrets); and none runs once a configuration
// file git reads from the repository has changed since the start.
type Repo struct {
	GitDir    string // absolute
	CommonDir string // absolute; GitDir but for a linked worktree
	WorkTree  string // absolute
	dir       string // where the commands run (the workdir)
	env       []string
	watched   []watchedFile
}

// watchedFile is a repository file git reads settings (and so commands)
// from, as it was when the repository was opened.
type watchedFile struct {
	path  string
	state string
}

// repoConfigFiles are the files under a git dir that git reads its
// repository settings from: its config (and includes named there), the
// worktree's config, the attributes that pick filters, and commondir,
// which makes another directory the source of all of them.
var repoConfigFiles = []string{"config", "config.worktree", filepath.Join("info", "attributes"), "commondir"}

// hardened are the options of every git command run on a Repo.
var hardened = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.untrackedCache=false",
	"-c", "diff.ignoreSubmodules=all",
	"-c", "submodule.recurse=false",
}

// OpenRepo finds the repository of dir, with env (nil: this process's) as
// the environment of every git command. git refuses a repository owned by
// another user (safe.directory).
func OpenRepo(ctx context.Context, dir string, env []string) (*Repo, error) {
	r := &Repo{dir: dir, env: env}
	out, err := r.run(ctx, "", false, "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir", "--show-toplevel")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 {
		return nil, fmt.Errorf("git rev-parse in %s: expected the git dir, the common dir and the work tree, got %q", dir, out)
	}
	r.GitDir, r.CommonDir, r.WorkTree = lines[0], lines[1], lines[2]
	r.watched = r.snapshot()
	// What the repository's own configuration says now is no more to be
	// trusted than what it says later: an earlier run's model may have
	// written it.
	if err := r.noCommands(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// CommandKeyError is a setting of the repository's own configuration (or
// a file it includes) that makes git run a program in the commands
// pg-loop runs: a filter's clean or smudge command, a signing program.
// The model's tools can write that configuration, so pg-loop runs no git
// command while one is there; the user's global and system settings are
// theirs and stay in force.
type CommandKeyError struct{ Scope, Key string }

func (e *CommandKeyError) Error() string {
	return fmt.Sprintf("the repository's %s git configuration sets %s, which makes git run a program (the model's tools can write that configuration): no git command run; move the setting to your global git configuration (git config --global) if you trust it, or remove it", e.Scope, e.Key)
}

// commandKey reports whether a configuration key makes add, status or
// commit run a program that -c cannot turn off for good.
func commandKey(key string) bool {
	key = strings.ToLower(key)
	section, rest, _ := strings.Cut(key, ".")
	name := rest
	if i := strings.LastIndex(rest, "."); i >= 0 {
		name = rest[i+1:]
	}
	switch section {
	case "filter":
		return name == "clean" || name == "smudge" || name == "process"
	case "gpg":
		return name == "program" || key == "gpg.ssh.defaultkeycommand"
	}
	return false
}

// noCommands refuses a repository whose own configuration (local or
// worktree scope, with the files they include) sets a command key.
func (r *Repo) noCommands(ctx context.Context) error {
	out, err := r.run(ctx, "", true, "config", "--list", "--show-scope", "--name-only", "--includes")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		scope, key, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok || (scope != "local" && scope != "worktree") {
			continue
		}
		if commandKey(key) {
			return &CommandKeyError{Scope: scope, Key: key}
		}
	}
	return nil
}

// snapshot is the state of every watched file now.
func (r *Repo) snapshot() []watchedFile {
	dirs := []string{r.GitDir}
	if r.CommonDir != r.GitDir {
		dirs = append(dirs, r.CommonDir)
	}
	var files []watchedFile
	for _, d := range dirs {
		for _, name := range repoConfigFiles {
			p := filepath.Join(d, name)
			files = append(files, watchedFile{path: p, state: fileState(p)})
		}
	}
	return files
}

// fileState sums a file's content, or says why there is none. It never
// follows a link or blocks on a named pipe.
func fileState(path string) string {
	f, err := atomicfile.Open(path)
	var ie *atomicfile.IrregularError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "absent"
	case errors.As(err, &ie):
		return ie.Kind
	case err != nil:
		return err.Error()
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("sha256:%x", h.Sum(nil))
}

// ChangedError is a repository configuration file that changed while
// the model worked: git is not run again in that repository.
type ChangedError struct{ Path string }

func (e *ChangedError) Error() string {
	return fmt.Sprintf("%s changed during the run (git reads commands from it; the model's tools can write it): nothing committed, no git command run; check it, then run again", e.Path)
}

// Changed reports the first watched file that is not as it was.
func (r *Repo) Changed() error {
	for _, w := range r.watched {
		if fileState(w.path) != w.state {
			return &ChangedError{Path: w.path}
		}
	}
	return nil
}

// run runs git on the repository, hardened; explicit names the git dir
// and work tree found at the start.
func (r *Repo) run(ctx context.Context, stdin string, explicit bool, args ...string) (string, error) {
	argv := append([]string{}, hardened...)
	if explicit {
		argv = append(argv, "--git-dir="+r.GitDir, "--work-tree="+r.WorkTree)
	}
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, "git", argv...)
	cmd.Dir = r.dir
	cmd.Env = r.env
	cmd.Stdin = strings.NewReader(stdin)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out.String(), nil
}

// git runs a git command on the repository once its configuration is
// known unchanged.
func (r *Repo) git(ctx context.Context, stdin string, args ...string) (string, error) {
	if err := r.Changed(); err != nil {
		return "", err
	}
	// A file the configuration includes may lie in the work tree, which
	// the watched files do not cover.
	if err := r.noCommands(ctx); err != nil {
		return "", err
	}
	return r.run(ctx, stdin, true, args...)
}

// CommitMessage makes a commit message from the model's final summary:
// the first non-empty line as subject (capped), the rest as body. The
// promise tag is dropped.
func CommitMessage(summary, fallback string) string {
	summary = promiseRE().ReplaceAllString(summary, "")
	lines := strings.Split(strings.TrimSpace(summary), "\n")
	subject := ""
	var body []string
	for i, l := range lines {
		l = strings.TrimSpace(strings.TrimLeft(l, "#*- "))
		if l == "" {
			continue
		}
		subject = l
		body = lines[i+1:]
		break
	}
	if subject == "" {
		subject = fallback
	}
	if len(subject) > 72 {
		cut := strings.LastIndexByte(subject[:72], ' ')
		if cut < 40 {
			cut = 72
		}
		subject = subject[:cut]
	}
	msg := subject
	if b := strings.TrimSpace(strings.Join(body, "\n")); b != "" {
		msg += "\n\n" + b
	}
	return msg + "\n"
}

// Commit commits every change in the work tree. It returns an empty hash
// when nothing changed.
func (r *Repo) Commit(ctx context.Context, message string) (string, error) {
	if _, err := r.git(ctx, "", "add", "-A"); err != nil {
		return "", err
	}
	st, err := r.git(ctx, "", "status", "--porcelain", "--ignore-submodules=all")
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(st) == "" {
		return "", nil
	}
	args := []string{"commit", "-q", "--no-verify", "-F", "-"}
	if _, err := r.git(ctx, "", "config", "user.email"); err != nil {
		var ce *ChangedError
		var ke *CommandKeyError
		if errors.As(err, &ce) || errors.As(err, &ke) {
			return "", err
		}
		// No identity configured: commit as pg-loop rather than fail.
		args = append([]string{"-c", "user.name=pg-loop", "-c", "user.email=pg-loop@localhost"}, args...)
	}
	if _, err := r.git(ctx, message, args...); err != nil {
		return "", err
	}
	out, err := r.git(ctx, "", "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}
