package skills

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad: any SKILL.md is a skill or a warning naming its file, never a
// panic; a skill always has a valid name and a description.
func FuzzLoad(f *testing.F) {
	f.Add("---\nname: a\ndescription: b\n---\nbody\n")
	f.Add("---\nname: [x\n---\n")
	f.Add("---\n- a\n- b\n---\n")
	f.Add("---\nname: a\ndescription: !!binary aGk=\n---\n")
	f.Add("\ufeff---\r\nname: a\r\ndescription: |\r\n  x\r\n...\r\n")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		p := filepath.Join(dir, "a", FileName)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		sk, _, err := Load(p)
		if err != nil {
			if w, ok := err.(Warning); ok && w.File != p {
				t.Fatalf("warning names %s, not %s", w.File, p)
			}
			return
		}
		if !nameRe().MatchString(sk.Name) || len(sk.Name) > MaxNameLen || sk.Description == "" {
			t.Fatalf("bad skill loaded: %+v", sk)
		}
		if _, err := sk.Body(); err != nil {
			t.Fatal(err)
		}
	})
}
