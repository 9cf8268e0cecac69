package tool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// read may open full outputs the tool saved outside the root, and nothing
// else there: a symlink planted in the output directory used to print its
// target (/etc/shadow, say), even under the readonly preset.
func TestReadSavedOutputsOnly(t *testing.T) {
	root, outDir, secretDir := t.TempDir(), t.TempDir(), t.TempDir()
	secret := filepath.Join(secretDir, "secret.txt")
	if err := os.WriteFile(secret, []byte("TOP SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newTestSession(t, Options{Root: root, OutputDir: outDir, Preset: "readonly", MaxOutput: 1000})
	// A real saved output: produced by capping a long result.
	if err := os.WriteFile(filepath.Join(root, "long.txt"), []byte(strings.Repeat("0123456789\n", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	out := callWithin(t, s, 10*time.Second, "read", `{"path":"long.txt"}`)
	if !out.OK || out.FullOutput == "" {
		t.Fatalf("capped read: ok=%v full_output=%q", out.OK, out.FullOutput)
	}
	if got := callWithin(t, s, 10*time.Second, "read", `{"path":"`+out.FullOutput+`","limit":1}`); !got.OK || !strings.Contains(got.Output, "0123456789") {
		t.Fatalf("reading the saved output: ok=%v output=%q error=%v", got.OK, got.Output, got.Error)
	}
	saved := filepath.Base(out.FullOutput)
	plant := func(name string, fn func(p string) error) string {
		p := filepath.Join(outDir, name)
		if err := fn(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	symlinkTo := func(target string) func(string) error {
		return func(p string) error { return os.Symlink(target, p) }
	}
	cases := []struct{ path, want string }{
		{plant("x.txt", symlinkTo(secret)), "not a name pg-tool gives"},
		{plant("20260101T000000-bash-0123abcd.txt", symlinkTo(secret)), "it is a symlink"},
		{plant("20260101T000000-read-0123abcd.txt", func(p string) error { return os.Link(out.FullOutput, p) }), "other hard links"},
		{plant("20260101T000000-grep-00000000.txt", func(p string) error { return os.Mkdir(p, 0o700) }), "not a regular file"},
		{filepath.Join(outDir, "20260101T000000-ls-99999999.txt"), "no such file"},
	}
	for _, c := range cases {
		got := callWithin(t, s, 10*time.Second, "read", `{"path":"`+c.path+`"}`)
		if got.OK || !strings.Contains(*got.Error, c.want) || strings.Contains(got.Output, "SECRET") {
			t.Errorf("read %s: ok=%v output=%q error=%v, want an error containing %q", filepath.Base(c.path), got.OK, got.Output, got.Error, c.want)
		}
	}
	// The output directory itself replaced by a symlink.
	moved := outDir + ".real"
	if err := os.Rename(outDir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, outDir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(outDir); os.Rename(moved, outDir) })
	if got := callWithin(t, s, 10*time.Second, "read", `{"path":"`+filepath.Join(outDir, saved)+`"}`); got.OK || !strings.Contains(*got.Error, "output directory is a symlink") {
		t.Errorf("read through a symlinked output dir: ok=%v error=%v", got.OK, got.Error)
	}
}

func TestSavedNamePattern(t *testing.T) {
	for name, want := range map[string]bool{
		"20261125T134500-bash-0123abcd.txt":             true,
		"20261125T134500-mcp__fs__x-error-0123abcd.txt": true,
		"20261125T134500-bash-0123ABCD.txt":             false,
		"x.txt":                                         false,
		"20261125T134500-bash-0123abcd.txt.lnk":         false,
		"20261125X134500-bash-0123abcd.txt":             false,
		"20261125T134500--0123abcd.txt":                 false,
		"20261125T134500-a.b-0123abcd.txt":              false,
	} {
		if got := savedName(name); got != want {
			t.Errorf("savedName(%q) = %v, want %v", name, got, want)
		}
	}
}

// One saved output is capped (MaxSaved): head and tail are kept, and the
// result's marker says so.
func TestSavedOutputCap(t *testing.T) {
	root, outDir := t.TempDir(), t.TempDir()
	s := newTestSession(t, Options{Root: root, OutputDir: outDir, MaxOutput: 1000, MaxSaved: 100000})
	out := callWithin(t, s, 30*time.Second, "bash", `{"command":"echo FIRST; head -c 1000000 /dev/zero | tr '\\0' x; echo; echo LAST"}`)
	if !out.OK || out.FullOutput == "" {
		t.Fatalf("bash: ok=%v full_output=%q error=%v", out.OK, out.FullOutput, out.Error)
	}
	b, err := os.ReadFile(out.FullOutput)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 100000+300 || !strings.HasPrefix(string(b), "FIRST\n") || !strings.Contains(string(b), "LAST\n") || !strings.Contains(string(b), "bytes not saved") {
		t.Errorf("saved output: %d bytes, head %q, tail %q", len(b), b[:min(len(b), 20)], b[max(0, len(b)-40):])
	}
	if !strings.Contains(out.Output, "keeps its first and last 50000 bytes") {
		t.Errorf("the result does not say the saved output was cut: %q", out.Output[:min(len(out.Output), 200)])
	}
	if fi, err := os.Stat(out.FullOutput); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("saved output mode: %v %v", fi.Mode(), err)
	}
}
