package loop

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
