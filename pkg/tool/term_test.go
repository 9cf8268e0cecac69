package tool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

func TestTermToolsWithoutPgPty(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	s, err := NewSession(Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.Call(context.Background(), protocol.ToolCall{Name: "term_start", Input: []byte(`{"name":"sh","command":["sh"]}`)})
	if r.OK || !strings.Contains(*r.Error, "pg-pty is not installed") {
		t.Fatalf("want a clear error, got %+v", r.ToolResult)
	}
}

// fakePty is a stand-in for pg-pty that follows its CLI contract and logs
// the arguments it got: the term tools' mapping is checked here; the real
// pg-pty is exercised by the e2e scripts once both are merged.
const fakePty = `#!/bin/sh
echo "$@" >> "$PTYLOG"
case "$1" in
start|send) exit 0 ;;
kill)
  # A failure is its {"type":"error"} record; stderr is for people, and
  # says something else here so that a reader of stderr is caught.
  case "$3" in *.gone) echo '{"type":"error","tool":"pg-pty","kind":"no_session","message":"no session '$3'","exit_code":1}'; echo "pg-pty: error: stderr is not the answer" >&2; exit 1 ;; esac ;;
read)
  case "$*" in
  *--wait*nomatch*) echo '{"type":"output","name":"'$2'","data":"partial","offset":0,"next_offset":7,"matched":false}'; exit 124 ;;
  *--wait*) echo '{"type":"output","name":"'$2'","data":"$ ","offset":5,"next_offset":7,"matched":true}' ;;
  *--since=100*) printf '%s\n' '{"type":"output","name":"'$2'","data":"late\n","offset":4096,"next_offset":4101,"skipped":3996,"output_lost":12}' ;;
  *--plain*) printf '%s\n' '{"type":"output","name":"'$2'","data":"hello\n","offset":0,"next_offset":7}' ;;
  *) printf '%s\n' '{"type":"output","name":"'$2'","data":"hello\r\n","offset":0,"next_offset":7}' ;;
  esac ;;
screen) echo '{"type":"screen","name":"'$2'","cols":20,"rows":3,"cursor":{"row":1,"col":2},"lines":["hello               ","$                   ","                    "]}' ;;
*) echo "pg-pty: error: unknown command $1" >&2; exit 2 ;;
esac
`

func TestTermToolsMapToPgPty(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "pg-pty"), []byte(fakePty), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "log")
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("PTYLOG", log)
	// Commands and pg-pty get allow-listed variables only: name the log.
	// pg-pty gets POWERGLIDE_HOME too; the programs it starts do not.
	env := []string{"PATH=" + os.Getenv("PATH"), "PTYLOG=" + log, "POWERGLIDE_HOME=/nonexistent/pg"}
	s, err := NewSession(Options{Root: t.TempDir(), Env: env, PassEnv: []string{"PTYLOG"}, TermScope: "t1", Caller: "pg-tool test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	by := fmt.Sprintf("--started-by=pg-tool test (pid %d, term scope t1) --unset-env=POWERGLIDE_HOME", os.Getpid())
	ctx := context.Background()
	cases := []struct {
		tool, input string
		ok          bool
		out, args   string
	}{
		{"term_start", `{"name":"sh","command":["bash","-i"],"cols":100,"rows":30}`, true, "started session sh: bash -i\n", "start --json " + by + " t1.sh --cols=100 --rows=30 -- bash -i"},
		{"term_send", `{"name":"sh","text":"echo hi","keys":["Enter","C-c"]}`, true, "sent to sh\n", "send --json t1.sh --keys=Enter,C-c -- echo hi"},
		{"term_send", `{"name":"sh","text":"--version"}`, true, "sent to sh\n", "send --json t1.sh -- --version"},
		{"term_read", `{"name":"sh","since":0}`, true, "hello\n[next_offset: 7]\n", "read --json t1.sh --plain --since=0"},
		{"term_read", `{"name":"sh","since":100}`, true, "[3996 bytes before offset 4096 were discarded (the session keeps only its latest output); reading from there]\nlate\n[12 bytes of the session's output could not be saved (disk full?); they are missing here]\n[next_offset: 4101]\n", "read --json t1.sh --plain --since=100"},
		{"term_read", `{"name":"sh","since":0,"raw":true}`, true, "hello\r\n[next_offset: 7]\n", "read --json t1.sh --since=0"},
		{"term_read", `{"name":"sh","wait":"\\$ $","timeout_ms":2000}`, true, "$ \n[next_offset: 7]\n", "read --json t1.sh --plain --wait=\\$ $ --timeout=2s"},
		{"term_read", `{"name":"sh","wait":"nomatch","timeout_ms":100}`, false, "partial\n[next_offset: 7]\n", "read --json t1.sh --plain --wait=nomatch --timeout=100ms"},
		{"term_screen", `{"name":"sh"}`, true, "[screen 20x3, cursor at row 1 col 2]\nhello\n$\n", "screen --json t1.sh"},
		{"term_kill", `{"name":"sh"}`, true, "killed session sh\n", "kill --json t1.sh"},
	}
	for _, c := range cases {
		_ = os.Remove(log)
		r := s.Call(ctx, protocol.ToolCall{Name: c.tool, Input: []byte(c.input)})
		if r.OK != c.ok || r.Output != c.out {
			t.Errorf("%s %s: got ok=%v output %q error %v; want ok=%v output %q", c.tool, c.input, r.OK, r.Output, r.Error, c.ok, c.out)
		}
		got, _ := os.ReadFile(log)
		if strings.TrimSpace(string(got)) != c.args {
			t.Errorf("%s: pg-pty got %q, want %q", c.tool, strings.TrimSpace(string(got)), c.args)
		}
	}
	// A failed pg-pty command is reported from its error record.
	r := s.Call(ctx, protocol.ToolCall{Name: "term_kill", Input: []byte(`{"name":"gone"}`)})
	if r.OK || *r.Error != "pg-pty kill: no session gone" {
		t.Errorf("failed pg-pty kill: %+v", r.ToolResult)
	}
	// The model's names never leave its scope: ".." or a scope of its
	// own in the name stay inside it.
	_ = os.Remove(log)
	s.Call(ctx, protocol.ToolCall{Name: "term_kill", Input: []byte(`{"name":"pgtool-0.sh"}`)})
	if got, _ := os.ReadFile(log); strings.TrimSpace(string(got)) != "kill --json t1.pgtool-0.sh" {
		t.Errorf("pg-pty got %q", got)
	}
	// Bad session names are refused by the schema before pg-pty runs.
	r = s.Call(ctx, protocol.ToolCall{Name: "term_kill", Input: []byte(`{"name":"../x"}`)})
	if r.OK || !strings.Contains(*r.Error, "field name") {
		t.Errorf("bad name: %+v", r.ToolResult)
	}
}

// TestTermScopes: each session gets its own name space unless given one,
// and a scope that could step out of it is refused.
func TestTermScopes(t *testing.T) {
	a, err := NewSession(Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewSession(Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.ptySession("sh") == b.ptySession("sh") || !strings.HasPrefix(a.ptySession("sh"), "pgtool-") {
		t.Errorf("two sessions share a name space: %s, %s", a.ptySession("sh"), b.ptySession("sh"))
	}
	for _, bad := range []string{"a.b", "../x", "-x", "a/b", strings.Repeat("x", 64)} {
		if s, err := NewSession(Options{Root: t.TempDir(), TermScope: bad}); err == nil {
			s.Close()
			t.Errorf("term scope %q accepted", bad)
		}
	}
}

// TestEndTermSessions: with EndTermSessions, Close kills the sessions the
// session started and did not kill itself, and no others.
func TestEndTermSessions(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "pg-pty"), []byte(fakePty), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "log")
	env := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "PTYLOG=" + log}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	for _, end := range []bool{true, false} {
		_ = os.Remove(log)
		s, err := NewSession(Options{Root: t.TempDir(), Env: env, PassEnv: []string{"PTYLOG"}, TermScope: "t2", EndTermSessions: end})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, c := range []protocol.ToolCall{
			{Name: "term_start", Input: []byte(`{"name":"a","command":["sh"]}`)},
			{Name: "term_start", Input: []byte(`{"name":"b","command":["sh"]}`)},
			{Name: "term_kill", Input: []byte(`{"name":"b"}`)},
		} {
			if r := s.Call(ctx, c); !r.OK {
				t.Fatalf("%s: %s", c.Name, *r.Error)
			}
		}
		s.Close()
		got, _ := os.ReadFile(log)
		kills := strings.Count(string(got), "kill --json t2.a")
		if want := map[bool]int{true: 1, false: 0}[end]; kills != want || strings.Count(string(got), "kill --json t2.b") != 1 {
			t.Errorf("EndTermSessions %v: pg-pty got %q", end, got)
		}
	}
}
