package loop

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/internal/testenv"
)

// A context file the model planted as a link to a secret, or as a named
// pipe, is not read: a warning names it, and the secret is in neither the
// context nor the warning.
func TestProjectContextRefusesLinksAndPipes(t *testing.T) {
	root, secrets := t.TempDir(), t.TempDir()
	os.Mkdir(filepath.Join(root, ".git"), 0o755)
	key := filepath.Join(secrets, "id_rsa")
	writeT(t, key, "SSHKEY-SECRET-0001\n", 0o600)
	if err := os.Symlink(key, filepath.Join(root, "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "CLAUDE.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var pc string
	var warns []error
	go func() { pc, warns = ProjectContext(root); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ProjectContext blocked on a named pipe")
	}
	all := pc
	for _, w := range warns {
		all += w.Error()
	}
	if strings.Contains(all, "SSHKEY") {
		t.Fatalf("the linked secret was read: %q", all)
	}
	if pc != "" {
		t.Errorf("context %q, want none", pc)
	}
	if len(warns) != 2 || !strings.Contains(warns[0].Error(), filepath.Join(root, "CLAUDE.md")+": a named pipe (FIFO), not a regular file: refused") ||
		!strings.Contains(warns[1].Error(), filepath.Join(root, "AGENTS.md")+": a symbolic link, not a regular file: refused") {
		t.Errorf("warnings %v", warns)
	}
}

// A link among the directories above the workspace is not followed: the
// walk stops below it.
func TestProjectContextStopsAtLinkedParent(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	writeT(t, filepath.Join(outside, "AGENTS.md"), "from behind a link\n", 0o644)
	os.Mkdir(filepath.Join(outside, ".git"), 0o755)
	ws := filepath.Join(base, "ws")
	os.Mkdir(ws, 0o755)
	writeT(t, filepath.Join(ws, "AGENTS.md"), "workspace rules\n", 0o644)
	// base/link -> outside; the workspace is reached as link/../ws and
	// resolved first, so the walk goes up through base, not outside.
	os.Symlink(outside, filepath.Join(base, "link"))
	pc, _ := ProjectContext(filepath.Join(base, "link", "..", "ws"))
	if !strings.Contains(pc, "workspace rules") || strings.Contains(pc, "from behind a link") {
		t.Errorf("context %q", pc)
	}
}

// A .git, AGENTS.md and CLAUDE.md in a parent owned by another user (a
// shared /tmp) are not the project's: the walk stops below it, with a
// warning, and the workspace's own file still counts.
func TestProjectContextIgnoresOtherUsersParent(t *testing.T) {
	shared := t.TempDir()
	os.Chmod(shared, 0o755)
	ws := filepath.Join(shared, "victim")
	os.Mkdir(ws, 0o755)
	writeT(t, filepath.Join(ws, "CLAUDE.md"), "my rules\n", 0o644)
	os.Mkdir(filepath.Join(shared, ".git"), 0o755)
	writeT(t, filepath.Join(shared, "AGENTS.md"), "Project rule from another user\n", 0o644)
	testenv.GiveToOtherUser(t, shared)
	testenv.GiveToOtherUser(t, filepath.Join(shared, ".git"))
	testenv.GiveToOtherUser(t, filepath.Join(shared, "AGENTS.md"))
	pc, warns := ProjectContext(ws)
	if strings.Contains(pc, "another user") || !strings.Contains(pc, "my rules") {
		t.Errorf("context %q", pc)
	}
	if len(warns) != 1 || !strings.Contains(warns[0].Error(), shared+" is owned by uid 65534") {
		t.Errorf("warnings %v", warns)
	}
	// The parent is this user's, but its AGENTS.md another's, or writable
	// by others: not read.
	os.Lchown(shared, os.Geteuid(), os.Getegid())
	os.Lchown(filepath.Join(shared, ".git"), os.Geteuid(), os.Getegid())
	pc, warns = ProjectContext(ws)
	if strings.Contains(pc, "another user") || len(warns) != 1 || !strings.Contains(warns[0].Error(), filepath.Join(shared, "AGENTS.md")+" is owned by uid 65534") {
		t.Errorf("context %q, warnings %v", pc, warns)
	}
	os.Lchown(filepath.Join(shared, "AGENTS.md"), os.Geteuid(), os.Getegid())
	os.Chmod(filepath.Join(shared, "AGENTS.md"), 0o666)
	pc, warns = ProjectContext(ws)
	if strings.Contains(pc, "another user") || len(warns) != 1 || !strings.Contains(warns[0].Error(), "has mode 0666: other users may write it") {
		t.Errorf("context %q, warnings %v", pc, warns)
	}
	// and a parent writable by others (/tmp itself) ends the walk
	os.Chmod(filepath.Join(shared, "AGENTS.md"), 0o644)
	os.Chmod(shared, 0o1777)
	pc, warns = ProjectContext(ws)
	if strings.Contains(pc, "another user") || len(warns) != 1 || !strings.Contains(warns[0].Error(), "has mode 0777: other users may write it") {
		t.Errorf("context %q, warnings %v", pc, warns)
	}
}
