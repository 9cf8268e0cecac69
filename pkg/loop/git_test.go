package loop

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/internal/testenv"
)

// gitT runs git in dir for a test (the user's own git, unhardened).
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newRepo is a git repository with one commit and an identity.
func newRepo(t *testing.T) string {
	t.Helper()
	testenv.Need(t, "the commit step runs git", "git")
	dir := t.TempDir()
	gitT(t, dir, "init", "-q")
	gitT(t, dir, "config", "user.email", "t@example.com")
	gitT(t, dir, "config", "user.name", "t")
	writeT(t, filepath.Join(dir, "README"), "x\n", 0o644)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "start")
	return dir
}

func writeT(t *testing.T, path, content string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
}

// plantScript is an executable that leaves a mark in marks when run.
func plantScript(t *testing.T, path, marks, name string) {
	t.Helper()
	writeT(t, path, "#!/bin/sh\necho ran >> '"+filepath.Join(marks, name)+"'\ncat >/dev/null 2>&1\n", 0o755)
}

func openRepoT(t *testing.T, dir string) *Repo {
	t.Helper()
	r, err := OpenRepo(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func headT(t *testing.T, dir string) string {
	return strings.TrimSpace(gitT(t, dir, "rev-parse", "HEAD"))
}

func noMarks(t *testing.T, marks string) {
	t.Helper()
	ents, _ := os.ReadDir(marks)
	for _, e := range ents {
		t.Errorf("planted %s ran outside the sandbox", e.Name())
	}
}

func TestRepoCommit(t *testing.T) {
	dir := t.TempDir()
	testenv.Need(t, "the commit step runs git", "git")
	gitT(t, dir, "init", "-q")
	r := openRepoT(t, dir)
	h, err := r.Commit(context.Background(), "nothing\n")
	if err != nil || h != "" {
		t.Fatalf("empty tree: %q %v", h, err)
	}
	writeT(t, filepath.Join(dir, "a"), "a", 0o644)
	h, err = r.Commit(context.Background(), "add a\n\nbody\n")
	if err != nil || len(h) != 40 {
		t.Fatalf("commit: %q %v", h, err)
	}
	if out := gitT(t, dir, "log", "--format=%s|%b"); strings.TrimSpace(out) != "add a|body" {
		t.Errorf("log %q", out)
	}
	if h2, _ := r.Commit(context.Background(), "again\n"); h2 != "" {
		t.Error("committed with nothing changed")
	}
}

// A hook the model plants (.git/hooks is in the workspace) never runs:
// post-commit, reference-transaction and post-index-change would, even
// with --no-verify.
func TestRepoCommitRunsNoHook(t *testing.T) {
	dir, marks := newRepo(t), t.TempDir()
	r := openRepoT(t, dir)
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "reference-transaction", "post-index-change", "prepare-commit-msg"} {
		plantScript(t, filepath.Join(dir, ".git", "hooks", h), marks, h)
	}
	writeT(t, filepath.Join(dir, "work.txt"), "work\n", 0o644)
	h, err := r.Commit(context.Background(), "work\n")
	if err != nil || len(h) != 40 {
		t.Fatalf("commit: %q %v", h, err)
	}
	noMarks(t, marks)
}

// The user's own core.fsmonitor is not run either: the model can rewrite
// the program it names when that lies in the workspace.
func TestRepoCommitRunsNoFsmonitor(t *testing.T) {
	dir, marks := newRepo(t), t.TempDir()
	plantScript(t, filepath.Join(dir, ".git", "fsmon.sh"), marks, "fsmonitor")
	gitT(t, dir, "config", "core.fsmonitor", filepath.Join(dir, ".git", "fsmon.sh"))
	r := openRepoT(t, dir)
	writeT(t, filepath.Join(dir, "work.txt"), "work\n", 0o644)
	if _, err := r.Commit(context.Background(), "work\n"); err != nil {
		t.Fatal(err)
	}
	noMarks(t, marks)
}

// A configuration file that changes while the model works stops every git
// command: a planted fsmonitor, a filter, a commondir redirection. Nothing
// is committed, and the error names the file.
func TestRepoRefusesChangedConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		file  string
		plant func(t *testing.T, dir, marks string)
	}{
		{"fsmonitor", "config", func(t *testing.T, dir, marks string) {
			plantScript(t, filepath.Join(dir, ".git", "fsmon.sh"), marks, "fsmonitor")
			gitT(t, dir, "config", "core.fsmonitor", filepath.Join(dir, ".git", "fsmon.sh"))
		}},
		{"filter", "config", func(t *testing.T, dir, marks string) {
			plantScript(t, filepath.Join(dir, ".git", "clean.sh"), marks, "filter")
			gitT(t, dir, "config", "filter.evil.clean", filepath.Join(dir, ".git", "clean.sh"))
			writeT(t, filepath.Join(dir, ".gitattributes"), "* filter=evil\n", 0o644)
		}},
		{"attributes", filepath.Join("info", "attributes"), func(t *testing.T, dir, marks string) {
			writeT(t, filepath.Join(dir, ".git", "info", "attributes"), "* filter=lfs\n", 0o644)
		}},
		{"commondir", "commondir", func(t *testing.T, dir, marks string) {
			evil := filepath.Join(dir, ".evil")
			gitT(t, dir, "init", "-q", "--bare", evil)
			plantScript(t, filepath.Join(evil, "fsmon.sh"), marks, "fsmonitor-commondir")
			gitT(t, evil, "config", "core.fsmonitor", filepath.Join(evil, "fsmon.sh"))
			writeT(t, filepath.Join(dir, ".git", "commondir"), evil+"\n", 0o644)
		}},
		{"config link", "config", func(t *testing.T, dir, marks string) {
			evil := filepath.Join(dir, "evilconfig")
			plantScript(t, filepath.Join(dir, "fsmon.sh"), marks, "fsmonitor-link")
			b, _ := os.ReadFile(filepath.Join(dir, ".git", "config"))
			writeT(t, evil, string(b)+"[core]\n\tfsmonitor = "+filepath.Join(dir, "fsmon.sh")+"\n", 0o644)
			os.Remove(filepath.Join(dir, ".git", "config"))
			if err := os.Symlink(evil, filepath.Join(dir, ".git", "config")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, marks := newRepo(t), t.TempDir()
			r := openRepoT(t, dir)
			before := headT(t, dir)
			tc.plant(t, dir, marks)
			writeT(t, filepath.Join(dir, "work.txt"), "work\n", 0o644)
			h, err := r.Commit(context.Background(), "work\n")
			var ce *ChangedError
			if !errors.As(err, &ce) || h != "" {
				t.Fatalf("commit after a planted %s: %q, %v; want a ChangedError", tc.name, h, err)
			}
			if want := filepath.Join(dir, ".git", tc.file); ce.Path != want || !strings.Contains(err.Error(), want+" changed during the run") {
				t.Errorf("error %q, want it to name %s", err, want)
			}
			noMarks(t, marks)
			os.Remove(filepath.Join(dir, ".git", "commondir")) // for the checks below
			if after := headT(t, dir); after != before {
				t.Errorf("HEAD moved from %s to %s", before, after)
			}
			if st := gitT(t, dir, "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "diff", "--cached", "--name-only"); st != "" {
				t.Errorf("staged: %q", st)
			}
		})
	}
}

// In a linked worktree the model rewrites the worktree's .git file to
// point at a git dir it made, with an fsmonitor: the commit still goes to
// the real repository, and the planted git dir is never read.
func TestRepoIgnoresRewrittenGitFile(t *testing.T) {
	main, marks := newRepo(t), t.TempDir()
	wt := filepath.Join(t.TempDir(), "wt")
	gitT(t, main, "worktree", "add", "-q", "-b", "agent", wt)
	r := openRepoT(t, wt)
	if r.WorkTree != wt || r.CommonDir != filepath.Join(main, ".git") {
		t.Fatalf("repo %+v", r)
	}
	evil := filepath.Join(wt, ".evilgit")
	gitT(t, wt, "init", "-q", "--bare", evil)
	plantScript(t, filepath.Join(wt, "fsmon.sh"), marks, "fsmonitor-gitfile")
	gitT(t, evil, "config", "core.fsmonitor", filepath.Join(wt, "fsmon.sh"))
	writeT(t, filepath.Join(wt, ".git"), "gitdir: "+evil+"\n", 0o644)
	writeT(t, filepath.Join(wt, "work.txt"), "work\n", 0o644)
	h, err := r.Commit(context.Background(), "work\n")
	if err != nil || len(h) != 40 {
		t.Fatalf("commit: %q %v", h, err)
	}
	noMarks(t, marks)
	if got := strings.TrimSpace(gitT(t, main, "rev-parse", "agent")); got != h {
		t.Errorf("branch agent of the real repository at %s, want the commit %s", got, h)
	}
}

// OpenRepo refuses a directory outside any repository.
func TestOpenRepoOutsideRepository(t *testing.T) {
	testenv.Need(t, "the commit step runs git", "git")
	dir := t.TempDir()
	if _, err := OpenRepo(context.Background(), dir, append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))); err == nil || !strings.Contains(err.Error(), "not a git repository") {
		t.Errorf("got %v", err)
	}
}

// A filter or signing program the repository's own configuration names
// runs git commands' programs outside the sandbox; a run cannot tell it
// from one an earlier run's model planted, so it is refused at the start
// (nothing to trust as the baseline), and before every git command when a
// file the configuration includes (which may lie in the work tree)
// brings one in later. The user's global configuration is theirs.
func TestRepoRefusesCommandKeys(t *testing.T) {
	for _, tc := range []struct{ key, value string }{
		{"filter.x.clean", "PROG"},
		{"filter.x.process", "PROG"},
		{"gpg.program", "PROG"},
		{"gpg.ssh.program", "PROG"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			dir, marks := newRepo(t), t.TempDir()
			prog := filepath.Join(dir, ".git", "planted.sh")
			plantScript(t, prog, marks, "planted")
			gitT(t, dir, "config", tc.key, strings.ReplaceAll(tc.value, "PROG", prog))
			gitT(t, dir, "config", "commit.gpgSign", "true")
			writeT(t, filepath.Join(dir, ".gitattributes"), "* filter=x\n", 0o644)
			_, err := OpenRepo(context.Background(), dir, nil)
			var ke *CommandKeyError
			if !errors.As(err, &ke) || ke.Key != tc.key || ke.Scope != "local" {
				t.Fatalf("OpenRepo = %v, want a CommandKeyError naming %s (local)", err, tc.key)
			}
			noMarks(t, marks)
		})
	}
	t.Run("included from the work tree during the run", func(t *testing.T) {
		dir, marks := newRepo(t), t.TempDir()
		writeT(t, filepath.Join(dir, "inc.cfg"), "", 0o644)
		gitT(t, dir, "config", "include.path", filepath.Join(dir, "inc.cfg"))
		r := openRepoT(t, dir)
		prog := filepath.Join(dir, "planted.sh")
		plantScript(t, prog, marks, "planted")
		writeT(t, filepath.Join(dir, "inc.cfg"), "[filter \"x\"]\n\tclean = "+prog+"\n", 0o644)
		writeT(t, filepath.Join(dir, ".gitattributes"), "* filter=x\n", 0o644)
		before := headT(t, dir)
		_, err := r.Commit(context.Background(), "work\n")
		var ke *CommandKeyError
		if !errors.As(err, &ke) || ke.Key != "filter.x.clean" {
			t.Fatalf("Commit = %v, want a CommandKeyError naming filter.x.clean", err)
		}
		if headT(t, dir) != before {
			t.Error("committed")
		}
		noMarks(t, marks)
	})
	t.Run("global settings are the user's", func(t *testing.T) {
		dir := newRepo(t)
		home := t.TempDir()
		writeT(t, filepath.Join(home, ".gitconfig"), "[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n", 0o644)
		r, err := OpenRepo(context.Background(), dir, append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config")))
		if err != nil {
			t.Fatalf("a global filter refused: %v", err)
		}
		writeT(t, filepath.Join(dir, "work.txt"), "work\n", 0o644)
		if h, err := r.Commit(context.Background(), "work\n"); err != nil || len(h) != 40 {
			t.Fatalf("commit: %q %v", h, err)
		}
	})
}
