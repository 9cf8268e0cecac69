package e2e

import (
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdPrivate checks that every directory under DIR (DIR included) is
// 0700 and every file 0600: `private DIR`. Sockets and symlinks are
// skipped (a socket's mode is the umask's; the directory guards it).
func cmdPrivate(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: private DIR")
	}
	root := ts.MkAbs(args[0])
	var bad []string
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		switch {
		case d.IsDir():
			want = 0o700
		case !fi.Mode().IsRegular():
			return nil
		}
		n++
		if fi.Mode().Perm() != want {
			rel, _ := filepath.Rel(root, p)
			bad = append(bad, rel+" "+fi.Mode().Perm().String())
		}
		return nil
	})
	ts.Check(err)
	if len(bad) > 0 {
		ts.Fatalf("not private (want files 0600, directories 0700):\n%s", strings.Join(bad, "\n"))
	}
	ts.Logf("%d files and directories are private", n)
}
