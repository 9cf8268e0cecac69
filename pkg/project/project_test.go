package project

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/internal/testenv"
)

func TestTrusted(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		mode os.FileMode
		gid  int // -1: this user's group
		want string
	}{
		{"private", 0o600, -1, ""},
		{"readable by all", 0o644, -1, ""},
		{"writable by this user's group", 0o664, -1, ""},
		{"writable by another group", 0o664, testenv.OtherUID, "has mode 0664: other users may write it"},
		{"writable by others", 0o646, -1, "has mode 0646: other users may write it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			os.WriteFile(p, nil, 0o600)
			if err := os.Chmod(p, tc.mode); err != nil {
				t.Fatal(err)
			}
			if tc.gid >= 0 {
				if os.Getuid() != 0 {
					testenv.Unavailable(t, "giving a file to group 65534", os.ErrPermission)
				}
				os.Lchown(p, os.Geteuid(), tc.gid)
			}
			fi, _ := os.Lstat(p)
			err := Trusted(fi)
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Trusted: %v, want %q", err, tc.want)
			}
			if f, err := Open(p); (err == nil) != (tc.want == "") {
				t.Errorf("Open: %v", err)
			} else if f != nil {
				f.Close()
			}
		})
	}
	p := filepath.Join(dir, "theirs")
	os.WriteFile(p, nil, 0o644)
	testenv.GiveToOtherUser(t, p)
	fi, _ := os.Lstat(p)
	if err := Trusted(fi); err == nil || !strings.Contains(err.Error(), "is owned by uid 65534, not by you") {
		t.Errorf("another user's file: %v", err)
	}
}

// The walk up ends at the repository root, and below a parent whose .git
// another user made.
func TestDirs(t *testing.T) {
	repo := t.TempDir()
	ws := filepath.Join(repo, "a", "ws")
	os.MkdirAll(ws, 0o755)
	os.Mkdir(filepath.Join(repo, ".git"), 0o755)
	dirs, warns := Dirs(ws)
	if len(warns) > 0 || strings.Join(dirs, ",") != strings.Join([]string{ws, filepath.Join(repo, "a"), repo}, ",") {
		t.Fatalf("dirs %v, warnings %v", dirs, warns)
	}
	testenv.GiveToOtherUser(t, filepath.Join(repo, ".git"))
	dirs, warns = Dirs(ws)
	if len(dirs) != 1 || dirs[0] != ws || len(warns) != 1 || !strings.Contains(warns[0].Error(), filepath.Join(repo, ".git")+" left out, and the directories above: "+filepath.Join(repo, ".git")+" is owned by uid 65534") {
		t.Errorf("dirs %v, warnings %v", dirs, warns)
	}
}
