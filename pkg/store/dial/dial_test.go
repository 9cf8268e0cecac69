package dial

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/config"
	"github.com/powerglide/powerglide/pkg/store/filestore"
)

func TestParse(t *testing.T) {
	for _, c := range []struct{ url, kind, home string }{
		{"", "file", ""},
		{"file:", "file", ""},
		{" file: ", "file", ""},
		{"file:/srv/pg", "file", "/srv/pg"},
		{"file:///srv/pg/", "file", "/srv/pg"},
		{"postgres://u:pw@db:5432/pg?sslmode=disable", "postgres", ""},
		{"postgresql:///pg", "postgres", ""},
		{"host=db dbname=pg", "postgres", ""},
	} {
		kind, home, err := Parse(c.url)
		if err != nil || kind != c.kind || home != c.home {
			t.Errorf("Parse(%q) = %q %q %v, want %q %q", c.url, kind, home, err, c.kind, c.home)
		}
	}
	for _, bad := range []string{"file:relative", "file://host/x", "mysql://u:pw@h/db", "teams", "postgres://u:pw@h:badport/db"} {
		_, _, err := Parse(bad)
		if err == nil {
			t.Errorf("Parse(%q) accepted", bad)
			continue
		}
		if cli.ExitCode(err) != cli.ExitUsage {
			t.Errorf("Parse(%q): exit %d, want 2", bad, cli.ExitCode(err))
		}
		if strings.Contains(err.Error(), "pw") {
			t.Errorf("Parse(%q): error shows the password: %v", bad, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:s3cret@db/pg":                   "postgres://u:xxxxx@db/pg",
		"postgres://u@db/pg":                          "postgres://u@db/pg",
		"postgres://db/pg?user=u&password=s3cret&x=1": "postgres://db/pg?user=u&password=xxxxx&x=1",
		"host=db password=s3cret dbname=pg":           "host=db password=xxxxx dbname=pg",
		"host=db password='s3 cret' dbname=pg":        "host=db password=xxxxx dbname=pg",
		"postgres://u:p@ss@db/pg":                     "postgres://u:xxxxx@db/pg",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	// A password with a '#' makes the URL unparsable, and the parser's
	// message quotes a piece of it: the error shows none of it.
	for _, u := range []string{"postgres://alice:Hash#Secret1@127.0.0.1:55432/ateam", "postgres://alice:Sl/ash@db/pg"} {
		_, _, err := Parse(u)
		if err == nil || strings.Contains(err.Error(), "Hash") || strings.Contains(err.Error(), "Sl") || !strings.Contains(err.Error(), "percent-encoded") {
			t.Errorf("Parse(%q): %v", u, err)
		}
	}
	err := redactErr("postgres://u:s3cret@db/pg", errors.New("dial postgres://u:s3cret@db/pg: password s3cret refused"))
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("redactErr: %v", err)
	}
}

// TestOpenFile: "" uses the home given; file:/path overrides it.
func TestOpenFile(t *testing.T) {
	home, other := t.TempDir(), t.TempDir()
	for url, want := range map[string]string{"": home, "file:": home, "file:" + other: other} {
		s, err := Open(url, home)
		if err != nil {
			t.Fatal(err)
		}
		fs, ok := s.(*filestore.Store)
		if !ok || fs.Home() != want || s.Kind() != "file" {
			t.Errorf("Open(%q): %T %v", url, s, s.Kind())
		}
		tm, _ := s.Team("x")
		if got := tm.(*filestore.Team).Dir().Path(); got != filepath.Join(want, "teams", "x") {
			t.Errorf("Open(%q): team dir %s", url, got)
		}
		s.Close()
	}
	if _, err := Open("nonsense", home); cli.ExitCode(err) != cli.ExitUsage {
		t.Errorf("nonsense: %v", err)
	}
}

func TestTeam(t *testing.T) {
	home := t.TempDir()
	cfg, err := config.Load(config.Options{File: filepath.Join(home, "none.json"), Flags: map[string]string{"home": home}})
	if err != nil {
		t.Fatal(err)
	}
	st, tm, err := Team(context.Background(), cfg, Options{}, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if tm.Name() != "alpha" || st.Kind() != "file" || st.(*filestore.Store).Home() != home {
		t.Errorf("Team: %s on %s at %s", tm.Name(), st.Kind(), st.(*filestore.Store).Home())
	}
	st.Close()
	for _, bad := range []string{"", "../up", "a b"} {
		if _, _, err := Team(context.Background(), cfg, Options{}, bad); cli.ExitCode(err) != cli.ExitUsage {
			t.Errorf("Team(%q): %v (exit %d), want bad input", bad, err, cli.ExitCode(err))
		}
	}
	cfg, err = config.Load(config.Options{File: filepath.Join(home, "none.json"), Flags: map[string]string{"store": "nonsense"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Team(context.Background(), cfg, Options{}, "alpha"); cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(err.Error(), "invalid store") {
		t.Errorf("a bad store: %v", err)
	}
}
