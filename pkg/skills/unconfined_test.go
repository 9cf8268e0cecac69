package skills

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A SKILL.md the model planted as a link to a secret that starts like a
// skill, or as a named pipe, is skipped with a warning naming it, never
// quoting it; a SKILL.md replaced by a link after discovery gives no body.
func TestSkillFileLinksAndPipesRefused(t *testing.T) {
	ws, secrets := t.TempDir(), t.TempDir()
	secret := filepath.Join(secrets, "secret.md")
	write(t, secret, skillMD("secret", "SECRET-DESCRIPTION-0001", "SECRET-BODY-0001\n"))
	link := filepath.Join(ws, ".claude/skills/secret/SKILL.md")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(ws, ".claude/skills/pipe/SKILL.md")
	os.MkdirAll(filepath.Dir(fifo), 0o755)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, ".claude/skills/good/SKILL.md"), skillMD("good", "A good skill.", "good body\n"))
	roots, _ := Roots(ws, env(nil))
	done := make(chan struct{})
	var list []Skill
	var warns []Warning
	go func() { list, warns = Discover(roots); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Discover blocked on a named pipe")
	}
	if len(list) != 1 || list[0].Name != "good" {
		t.Errorf("skills %v", list)
	}
	var all []string
	for _, w := range warns {
		all = append(all, w.Error())
	}
	text := strings.Join(all, "\n")
	if strings.Contains(text, "SECRET") {
		t.Errorf("a warning quotes the linked file: %s", text)
	}
	for _, want := range []string{"skill " + link + ": a symbolic link, not a regular file: refused", "skill " + fifo + ": a named pipe (FIFO), not a regular file: refused"} {
		if !strings.Contains(text, want) {
			t.Errorf("warnings lack %q:\n%s", want, text)
		}
	}
	good := list[0]
	os.Remove(good.Path)
	os.Symlink(secret, good.Path)
	if body, err := good.Body(); err == nil || strings.Contains(body+err.Error(), "SECRET") || !strings.Contains(err.Error(), "a symbolic link, not a regular file: refused") {
		t.Errorf("body through a link: %q, %v", body, err)
	}
}
