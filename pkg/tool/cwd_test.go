package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/sandbox"
	"golang.org/x/sys/unix"
)

// A command that opens descriptors of its own at the numbers bash gives
// its variable redirections (exec 10>file, the flock idiom) gets its file
// back untouched: the working directory goes only to pg-tool's channel,
// never into a file the command opened; and a later cd still carries over.
func TestBashCwdNeverWrittenIntoTheCommandsFiles(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.Off, sandbox.WorkspaceWrite} {
		t.Run(string(mode), func(t *testing.T) { testCwdChannel(t, mode) })
	}
}

// Where memfd_create is refused (a seccomp profile, an old kernel), the
// working directory comes back through a file in TMPDIR without a name
// (O_TMPFILE), or where that cannot be made, one removed at once; cd still
// carries over, and nothing is left behind.
func TestBashCwdWithoutMemfd(t *testing.T) {
	memfd, tmpfile := memfdCreate, openTmpfile
	defer func() { memfdCreate, openTmpfile = memfd, tmpfile }()
	memfdCreate = func(string, int) (int, error) { return -1, unix.ENOSYS }
	for _, named := range []bool{false, true} {
		if named {
			openTmpfile = func(string) (int, error) { return -1, unix.EOPNOTSUPP }
		}
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		testCwdChannel(t, sandbox.Off)
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Fatalf("named %v: left in TMPDIR: %v", named, left)
		}
	}
}

func testCwdChannel(t *testing.T, mode sandbox.Mode) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Policy{Mode: mode, Root: root, Home: os.Getenv("HOME")})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Err(); err != nil {
		t.Fatalf("sandbox %s: %v", mode, err)
	}
	s, err := NewSession(Options{Root: root, PersistCwd: true, Sandbox: sb})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	bash := func(cmd string) string {
		t.Helper()
		in, _ := json.Marshal(map[string]string{"command": cmd})
		r := s.Call(ctx, protocol.ToolCall{ID: "1", Name: "bash", Input: in})
		if !r.OK {
			t.Fatalf("%s: %s", cmd, *r.Error)
		}
		return r.Output
	}
	for fd := 10; fd <= 12; fd++ {
		name := "f" + string(rune('0'+fd-10))
		bash("cd sub; exec " + strconv.Itoa(fd) + ">" + name + "; echo x >&" + strconv.Itoa(fd))
		b, err := os.ReadFile(filepath.Join(root, "sub", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != "x\n" {
			t.Errorf("fd %d: the command's file holds %q, want %q", fd, b, "x\n")
		}
		if out := bash("pwd; cd " + root); !strings.HasPrefix(out, filepath.Join(root, "sub")+"\n") {
			t.Errorf("fd %d: the cd before exec %d>file did not carry over: pwd says %q", fd, fd, out)
		}
	}
}

// The directory channel wraps only a line that may change the directory:
// every way a line can reach cd still carries over, and any other line
// runs as plain bash -c (no wrapper variables in its shell).
func TestBashCwdOnlyWhenItMayChange(t *testing.T) {
	for _, c := range []struct {
		line string
		want bool
	}{
		{"cd sub", true}, {"ls; cd sub", true}, {"builtin cd sub", true}, {"pushd sub", true}, {"popd", true},
		{"source ./go.sh", true}, {". ./go.sh", true}, {"true && . ./go.sh", true}, {"(. ./go.sh)", true}, {"eval \"$x\"", true},
		{"echo step 1", false}, {"go test ./...", false}, {"ls -la", false}, {"cat a.b", false}, {"grep -r foo .", false}, {"echo done.", false},
	} {
		if got := mayChangeDir(c.line); got != c.want {
			t.Errorf("mayChangeDir(%q) = %v, want %v", c.line, got, c.want)
		}
	}

	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.sh"), []byte("cd sub\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(Options{Root: root, PersistCwd: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bash := func(cmd string) string {
		t.Helper()
		in, _ := json.Marshal(map[string]string{"command": cmd})
		r := s.Call(context.Background(), protocol.ToolCall{ID: "1", Name: "bash", Input: in})
		if r.Error != nil {
			t.Fatalf("%s: %s", cmd, *r.Error)
		}
		return strings.TrimSuffix(r.Output, "[exit code: 0]\n")
	}
	for _, line := range []string{"cd sub", "builtin cd sub", "pushd sub >/dev/null", "source ./go.sh", ". ./go.sh", "true && . ./go.sh", "eval 'c''d sub'", "f() { cd sub; }; f"} {
		bash("cd " + root)
		bash(line)
		if got := bash("pwd -P"); filepath.Base(strings.TrimSpace(got)) != "sub" {
			t.Errorf("after %q the next call runs in %q, want sub", line, got)
		}
	}
	if got := bash("compgen -v __pg_ || echo plain"); got != "plain\n" {
		t.Errorf("a line that cannot change the directory ran wrapped: %q", got)
	}
	if got := bash("cd . && compgen -v __pg_c"); !strings.Contains(got, "__pg_c1") {
		t.Errorf("a line with cd ran without the channel: %q", got)
	}
}
