package teamdir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/internal/testenv"
)

// tree makes base/home/teams/t (all 0700) in a fresh directory base and
// returns base and the team's Dir.
func tree(t *testing.T) (string, Dir) {
	t.Helper()
	base := t.TempDir()
	d, err := New(filepath.Join(base, "home"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(d.Path(), 0o700); err != nil {
		t.Fatal(err)
	}
	return base, d
}

func chmod(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestCheckRefusesWhatOthersCouldChange(t *testing.T) {
	for _, c := range []struct {
		name string
		mess func(t *testing.T, base string, d Dir)
		want string // in the error
	}{
		{"data root writable by others", func(t *testing.T, base string, d Dir) { chmod(t, d.Home, 0o777) }, "refusing data root"},
		{"data root sticky and writable by others", func(t *testing.T, base string, d Dir) { chmod(t, d.Home, fs.ModeSticky|0o777) }, "refusing data root"},
		{"teams/ writable by its group", func(t *testing.T, base string, d Dir) { chmod(t, Teams(d.Home), 0o770) }, "refusing teams directory"},
		{"team directory writable by others", func(t *testing.T, base string, d Dir) { chmod(t, d.Path(), 0o703) }, "refusing team directory"},
		{"data root of another user", func(t *testing.T, base string, d Dir) { testenv.GiveToOtherUser(t, d.Home) }, "owned by uid 65534"},
		{"teams/ of another user", func(t *testing.T, base string, d Dir) { testenv.GiveToOtherUser(t, Teams(d.Home)) }, "refusing teams directory"},
		{"team directory of another user, 0700", func(t *testing.T, base string, d Dir) { testenv.GiveToOtherUser(t, d.Path()) }, "refusing team directory"},
		{"team directory a file", func(t *testing.T, base string, d Dir) {
			os.Remove(d.Path())
			os.WriteFile(d.Path(), nil, 0o600)
		}, "is not a directory"},
		{"parent writable by others, not sticky", func(t *testing.T, base string, d Dir) { chmod(t, base, 0o777) }, "refusing directory on the way to the team directory BASE: it has mode 0777"},
		{"parent sticky but another user's", func(t *testing.T, base string, d Dir) {
			chmod(t, base, fs.ModeSticky|0o777)
			testenv.GiveToOtherUser(t, base)
		}, "owned by uid 65534"},
		{"data root a link into a directory others may write", func(t *testing.T, base string, d Dir) {
			open := filepath.Join(base, "open")
			os.Mkdir(open, 0o777)
			chmod(t, open, 0o777)
			os.Rename(d.Home, filepath.Join(open, "home"))
			os.Symlink(filepath.Join(open, "home"), d.Home)
		}, "refusing directory on the way to the team directory BASE/open"},
		{"data root reached through a directory others may write", func(t *testing.T, base string, d Dir) {
			os.Mkdir(filepath.Join(base, "private"), 0o700)
			os.Rename(d.Home, filepath.Join(base, "private", "home"))
			open := filepath.Join(base, "open")
			os.Mkdir(open, 0o700)
			chmod(t, open, 0o777)
			os.Symlink(filepath.Join(base, "private", "home"), filepath.Join(open, "home"))
			os.Remove(d.Home)
			os.Symlink(filepath.Join(open, "home"), d.Home)
		}, "refusing directory on the way to the team directory BASE/open"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, d := tree(t)
			c.mess(t, base, d)
			err := d.Check()
			var ue *UnsafeError
			if !errors.As(err, &ue) || !ue.BadInput() {
				t.Fatalf("Check: %v, want an UnsafeError", err)
			}
			if want := strings.ReplaceAll(c.want, "BASE", base); !strings.Contains(err.Error(), want) {
				t.Errorf("Check: %v, want %q in it", err, want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("Check: %q is more than a line", err)
			}
			// Ensure refuses it the same, and creates nothing there.
			if err := d.Ensure(); !errors.As(err, &ue) {
				t.Errorf("Ensure: %v, want an UnsafeError", err)
			}
			if _, err := os.Stat(filepath.Join(d.Path(), LogsDir)); err == nil {
				t.Errorf("Ensure made %s in a refused tree", LogsDir)
			}
		})
	}
}

func TestCheckAccepts(t *testing.T) {
	for _, c := range []struct {
		name string
		mess func(t *testing.T, base string, d Dir)
	}{
		{"all 0700", func(t *testing.T, base string, d Dir) {}},
		{"readable by others", func(t *testing.T, base string, d Dir) {
			chmod(t, d.Home, 0o755)
			chmod(t, Teams(d.Home), 0o755)
			chmod(t, d.Path(), 0o750)
		}},
		{"parent sticky like /tmp, owned by us", func(t *testing.T, base string, d Dir) { chmod(t, base, fs.ModeSticky|0o777) }},
		{"no team directory yet", func(t *testing.T, base string, d Dir) { os.Remove(d.Path()) }},
		{"no data root yet", func(t *testing.T, base string, d Dir) { os.RemoveAll(d.Home) }},
		{"team directory a link to a private directory", func(t *testing.T, base string, d Dir) {
			os.Rename(d.Path(), filepath.Join(base, "elsewhere"))
			os.Symlink(filepath.Join(base, "elsewhere"), d.Path())
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, d := tree(t)
			c.mess(t, base, d)
			if err := d.Check(); err != nil {
				t.Fatalf("Check: %v", err)
			}
			if err := d.Ensure(); err != nil {
				t.Fatalf("Ensure: %v", err)
			}
		})
	}
}

// TestEnsureRefusesADataRootAnotherUserMadeFirst is the shared-/tmp case:
// another user creates the data root and teams/ (0777) before the first
// command of this one, which must refuse them rather than put its team
// there.
func TestEnsureRefusesADataRootAnotherUserMadeFirst(t *testing.T) {
	base := t.TempDir()
	chmod(t, filepath.Dir(base), 0o711) // the other user must get through
	chmod(t, base, fs.ModeSticky|0o777) // a /tmp of our own
	home := filepath.Join(base, "pgshared")
	testenv.AsOtherUser(t, "mkdir", "-m", "777", home, filepath.Join(home, "teams"))
	d, err := New(home, "t")
	if err != nil {
		t.Fatal(err)
	}
	err = d.Ensure()
	var ue *UnsafeError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "refusing data root "+home+": it is owned by uid 65534") {
		t.Fatalf("Ensure: %v, want the data root refused", err)
	}
	if _, err := os.Stat(d.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Ensure made the team directory in the other user's data root (%v)", err)
	}
}

// TestEnsureMakesPrivateDirectories: what Ensure makes is 0700 (the umask
// can only narrow it), the data root and teams/ included.
func TestEnsureMakesPrivateDirectories(t *testing.T) {
	d, err := New(filepath.Join(t.TempDir(), "a", "home"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ensure(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(d.Home), d.Home, Teams(d.Home), d.Path(), filepath.Join(d.Path(), LogsDir)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %04o, want 0700", p, fi.Mode().Perm())
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	d, err := New(filepath.Join(b.TempDir(), "home"), "t")
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Ensure(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := d.Check(); err != nil {
			b.Fatal(err)
		}
	}
}
