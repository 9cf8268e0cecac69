package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/proc"
	"golang.org/x/sys/unix"
)

// TestMain lets the test binary stand in for pg-tool's sandbox-exec.
func TestMain(m *testing.M) {
	if len(os.Args) > 4 && os.Args[1] == ExecCommand && os.Args[2] == "--policy" && os.Args[4] == "--" {
		self, _ := os.Executable()
		ws, err := Exec(os.Args[3], self, os.Args[5:], os.Environ())
		exitAs(ws, err)
	}
	if len(os.Args) > 3 && os.Args[1] == ExecCommand && strings.HasPrefix(os.Args[2], InitFlag+"=") && os.Args[3] == "--" {
		ws, err := Init(strings.TrimPrefix(os.Args[2], InitFlag+"="), os.Args[4:], os.Environ())
		exitAs(ws, err)
	}
	if len(os.Args) > 2 && os.Args[1] == probeCommand {
		os.Exit(probe(os.Args[2:]))
	}
	if len(os.Args) > 3 && os.Args[1] == startCommand {
		os.Exit(startHelper(os.Args[2], os.Args[3:]))
	}
	os.Exit(m.Run())
}

// exitAs ends the test binary standing in for sandbox-exec as the program
// ended.
func exitAs(ws syscall.WaitStatus, err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-exec:", err)
		os.Exit(126)
	}
	if ws.Signaled() {
		proc.Raise(ws.Signal())
		os.Exit(128 + int(ws.Signal()))
	}
	os.Exit(ws.ExitStatus())
}

// fixture is a workspace, an outside directory and a home with a key.
type fixture struct {
	root, outside, home string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	dir := t.TempDir()
	f := fixture{root: filepath.Join(dir, "ws"), outside: filepath.Join(dir, "outside"), home: filepath.Join(dir, "home")}
	for _, d := range []string{f.root, f.outside, filepath.Join(f.home, ".ssh")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.home, ".ssh", "id_ed25519"), []byte("FAKE-KEY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.home, "notes.txt"), []byte("readable\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// newSandbox makes a sandbox; a machine that cannot enforce it fails the
// test under CI and skips it, saying why, elsewhere.
func newSandbox(t *testing.T, p Policy) *Sandbox {
	t.Helper()
	sb, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	if err := sb.Err(); err != nil && !slices.Contains(p.Disable, "landlock") && len(p.Disable) == 0 {
		skipOrFail(t, err)
	}
	return sb
}

// skipOrFail ends a test on a machine that cannot set the sandbox up: a
// failure under CI, a skip that says why elsewhere.
func skipOrFail(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("the sandbox cannot be set up on this machine: %v", err)
	}
	t.Skipf("the sandbox cannot be set up on this machine: %v", err)
}

// run runs a bash line in the sandbox and returns its output and error.
func run(t *testing.T, sb *Sandbox, dir, line string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = dir
	cmd.Env = sb.Env(os.Environ(), nil)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := sb.Start(cmd); err != nil {
		return "", err
	}
	err := cmd.Wait()
	return out.String(), err
}

func TestParseMode(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Mode
		err  bool
	}{{"", WorkspaceWrite, false}, {"workspace-write", WorkspaceWrite, false}, {"read-only", ReadOnly, false}, {"off", Off, false}, {"none", "", true}} {
		got, err := ParseMode(c.in)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("ParseMode(%q) = %q, %v", c.in, got, err)
		}
	}
}

func TestEnvAllowList(t *testing.T) {
	sb := &Sandbox{policy: Policy{TempDir: "/private/tmp"}, prepared: true}
	env := sb.Env([]string{"PATH=/bin", "HOME=/h", "LC_ALL=C", "TMPDIR=/tmp", "ANTHROPIC_API_KEY=sk-1", "GITHUB_TOKEN=t", "AWS_SECRET_ACCESS_KEY=s", "GOCACHE=/c", "MINE=1"}, []string{"MINE"})
	want := []string{"PATH=/bin", "HOME=/h", "LC_ALL=C", "GOCACHE=/c", "MINE=1", "TMPDIR=/private/tmp"}
	if !slices.Equal(env, want) {
		t.Errorf("Env = %q, want %q", env, want)
	}
}

// TestPreparedWhenNeeded: New makes nothing; the private TMPDIR and the
// rules come with the first command (or the first question about them),
// so a pg-tool that runs nothing (list) pays for neither, and Close
// removes what was made.
func TestPreparedWhenNeeded(t *testing.T) {
	f := newFixture(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	sb, err := New(Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Fatalf("New made %v in TMPDIR", entries)
	}
	if sb.Mode() != WorkspaceWrite {
		t.Errorf("Mode = %q", sb.Mode())
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Fatalf("Mode made %v in TMPDIR", entries)
	}
	if err := sb.Err(); err != nil {
		skipOrFail(t, err)
	}
	if out, err := run(t, sb, f.root, `echo "$TMPDIR"`); err != nil || !strings.HasPrefix(out, tmp+"/pg-tool-tmp-") {
		t.Fatalf("TMPDIR of a command: %q, %v", out, err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 1 {
		t.Fatalf("TMPDIR holds %v, want one private directory", entries)
	}
	sb.Close()
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("Close left %v", entries)
	}
}

func TestWritesConfined(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home})
	for _, line := range []string{
		"touch " + f.outside + "/touched",
		"echo x > in && cp in " + f.outside + "/copied",
		"python3 -c 'open(\"" + f.outside + "/py\", \"w\")'",
		"ln -s " + f.outside + " link && echo x > link/through",
		"truncate -s 0 " + f.home + "/notes.txt",
		"rm " + f.home + "/notes.txt",
	} {
		if out, err := run(t, sb, f.root, line); err == nil {
			t.Errorf("%s: succeeded (%s)", line, out)
		} else if !strings.Contains(out, "ermission denied") && !strings.Contains(out, "PermissionError") {
			t.Errorf("%s: %v, want permission denied in %q", line, err, out)
		}
	}
	entries, _ := os.ReadDir(f.outside)
	if len(entries) != 0 {
		t.Errorf("outside changed: %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(f.home, "notes.txt")); string(b) != "readable\n" {
		t.Errorf("notes.txt changed: %q", b)
	}
	if out, err := run(t, sb, f.root, "mkdir -p a/b && echo ok > a/b/f && mv a/b/f g && echo t > $TMPDIR/t && cat g $TMPDIR/t"); err != nil || out != "ok\nt\n" {
		t.Errorf("writes inside: %q, %v", out, err)
	}
}

func TestReadOnly(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: ReadOnly, Root: f.root, Home: f.home})
	if out, err := run(t, sb, f.root, "touch x"); err == nil {
		t.Errorf("write in the workspace under read-only succeeded: %q", out)
	}
	if out, err := run(t, sb, f.root, "echo t > $TMPDIR/t && cat $TMPDIR/t"); err != nil || out != "t\n" {
		t.Errorf("TMPDIR under read-only: %q, %v", out, err)
	}
}

func TestSecretsHidden(t *testing.T) {
	f := newFixture(t)
	deny := filepath.Join(f.outside, "deny")
	if err := os.WriteFile(deny, []byte("DENIED\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home, DenyRead: []string{deny}})
	for _, p := range []string{filepath.Join(f.home, ".ssh", "id_ed25519"), deny} {
		if out, err := run(t, sb, f.root, "cat "+p); err == nil || strings.Contains(out, "FAKE-KEY") || strings.Contains(out, "DENIED") {
			t.Errorf("cat %s: %q, %v", p, out, err)
		}
	}
	// A link planted in the workspace does not reach it either.
	if out, err := run(t, sb, f.root, "ln -s "+f.home+"/.ssh keys && cat keys/id_ed25519"); err == nil || strings.Contains(out, "FAKE-KEY") {
		t.Errorf("through a link: %q, %v", out, err)
	}
	if out, err := run(t, sb, f.root, "cat "+f.home+"/notes.txt; head -c0 /usr/include/stdio.h && echo include"); err != nil || out != "readable\ninclude\n" {
		t.Errorf("reads around the secrets: %q, %v", out, err)
	}
	r := sb.Report(nil)
	if !slices.Contains(r.Hidden, filepath.Join(f.home, ".ssh")) || !slices.Contains(r.Hidden, deny) {
		t.Errorf("report hidden = %v", r.Hidden)
	}
}

// TestDataRootInWorkspace: a data root inside the workspace cannot be
// hidden where the workspace is writable, and the report says so (it was
// left out silently); under read-only it is hidden like any other.
func TestDataRootInWorkspace(t *testing.T) {
	f := newFixture(t)
	data := filepath.Join(f.root, ".pghome")
	if err := os.MkdirAll(filepath.Join(data, "teams", "other"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "teams", "other", "queue.json"), []byte("OTHER-TEAM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home, DataRoot: data})
	if r := sb.Report(nil); !slices.Contains(r.NotHidden, data) || slices.Contains(r.Hidden, data) {
		t.Errorf("workspace-write: not_hidden = %v, hidden = %v; want the data root %s not hidden", r.NotHidden, r.Hidden, data)
	}
	ro := newSandbox(t, Policy{Mode: ReadOnly, Root: f.root, Home: f.home, DataRoot: data})
	if r := ro.Report(nil); !slices.Contains(r.Hidden, data) || slices.Contains(r.NotHidden, data) {
		t.Errorf("read-only: hidden = %v, not_hidden = %v; want the data root %s hidden", r.Hidden, r.NotHidden, data)
	}
	if out, err := run(t, ro, f.root, "cat .pghome/teams/other/queue.json"); err == nil || strings.Contains(out, "OTHER-TEAM") {
		t.Errorf("read-only: the data root in the workspace is readable: %q, %v", out, err)
	}
	if out, err := run(t, ro, f.root, "ls >/dev/null && echo listed"); err != nil || out != "listed\n" {
		t.Errorf("read-only: the rest of the workspace: %q, %v", out, err)
	}
}

func TestNoNetwork(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	udp, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	sock := filepath.Join(f.outside, "s.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	got := make(chan string, 3)
	go func() {
		if c, err := ln.Accept(); err == nil {
			got <- "tcp"
			c.Close()
		}
	}()
	go func() {
		if c, err := ul.Accept(); err == nil {
			got <- "unix"
			c.Close()
		}
	}()
	go func() {
		b := make([]byte, 8)
		if _, _, err := udp.ReadFrom(b); err == nil {
			got <- "udp"
		}
	}()
	for _, line := range []string{
		fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", port),
		fmt.Sprintf("python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"x\", (\"127.0.0.1\", %d))'", port),
		fmt.Sprintf("python3 -c 'import socket; socket.socket(socket.AF_INET6).connect((\"::1\", %d))'", port),
		"python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"" + sock + "\")'",
	} {
		if out, err := run(t, sb, f.root, line); err == nil {
			t.Errorf("%s: succeeded: %q", line, out)
		}
	}
	select {
	case what := <-got:
		t.Errorf("a %s connection reached the test's listener", what)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestBackgroundProcessesEnd(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home})
	out, err := run(t, sb, f.root, "(sleep 0.3; echo > job) & setsid -f sh -c 'sleep 0.3; echo > setsid'; (sh -c 'sleep 0.3; echo > fork' &); echo $$")
	if err != nil || out != "1\n" {
		t.Fatalf("got %q, %v; want the command as PID 1", out, err)
	}
	time.Sleep(600 * time.Millisecond)
	for _, name := range []string{"job", "setsid", "fork"} {
		if _, err := os.Stat(filepath.Join(f.root, name)); err == nil {
			t.Errorf("a %s background process outlived the command", name)
		}
	}
}

func TestRefusal(t *testing.T) {
	f := newFixture(t)
	for _, mech := range []string{"landlock", "seccomp", "userns"} {
		sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home, Disable: []string{mech}})
		_, err := run(t, sb, f.root, "touch ran")
		var ue *UnavailableError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--sandbox off runs commands unconfined") {
			t.Errorf("%s missing: got %v, want a refusal", mech, err)
		}
		if _, err := os.Stat(filepath.Join(f.root, "ran")); err == nil {
			t.Errorf("%s missing: the command ran", mech)
		}
		if r := sb.Report(nil); r.Available || len(r.Missing) == 0 {
			t.Errorf("%s missing: report %+v", mech, r)
		}
		if _, err := sb.Wrap("/bin/helper", []string{"true"}); !errors.As(err, &ue) {
			t.Errorf("%s missing: Wrap = %v, want a refusal", mech, err)
		}
	}
}

// TestExec runs a program through the sandbox-exec helper, as pg-pty's
// terminal programs and MCP servers are.
func TestExec(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home})
	argv, err := sb.Wrap(os.Args[0], []string{"bash", "-c", "touch inside; touch " + f.outside + "/x; cat " + f.home + "/.ssh/id_ed25519"})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = f.root
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Permission denied") || strings.Contains(string(out), "FAKE-KEY") {
		t.Errorf("sandbox-exec: %q, %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(f.root, "inside")); err != nil {
		t.Errorf("the write inside failed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.outside, "x")); err == nil {
		t.Error("the write outside succeeded")
	}
}

// TestExecEndsWhatItLeft: a program run through sandbox-exec (a terminal
// program, an MCP server) is below an init of its own in a PID namespace:
// what it leaves running, even after setsid, ends when it ends.
func TestExecEndsWhatItLeft(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home})
	const mark = "3779.125"
	argv, err := sb.Wrap(os.Args[0], []string{"bash", "-c", "setsid sleep " + mark + " </dev/null >/dev/null 2>&1 & sleep 0.2; echo left"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil || string(out) != "left\n" {
		t.Fatalf("sandbox-exec: %q, %v", out, err)
	}
	if left := processesWith("sleep\x00" + mark); len(left) > 0 {
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Errorf("what the program left outlived it: pids %v", left)
	}
}

// processesWith lists the processes whose command line holds s.
func processesWith(s string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), s) {
			out = append(out, pid)
		}
	}
	return out
}

// TestExecSignals: sandbox-exec hands SIGTERM on to the program, and the
// program is no PID 1: a signal it does not handle (Ctrl-C, to the
// terminal's process group) ends it, and sandbox-exec ends by the same
// signal, as the program did.
func TestExecSignals(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home})
	start := func(line string) (*exec.Cmd, *bufio.Reader) {
		t.Helper()
		argv, err := sb.Wrap(os.Args[0], []string{"bash", "-c", line})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		r := bufio.NewReader(out)
		if l, err := r.ReadString('\n'); l != "ready\n" {
			t.Fatalf("%s: %q, %v", line, l, err)
		}
		return cmd, r
	}
	cmd, out := start("trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done")
	_ = cmd.Process.Signal(syscall.SIGTERM) // to sandbox-exec alone
	if l, _ := out.ReadString('\n'); l != "got-term\n" {
		t.Errorf("SIGTERM: the program printed %q", l)
	}
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("SIGTERM: %v, want exit code 3", err)
	}
	cmd, _ = start("echo ready; exec sleep 300")
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) // as Ctrl-C does
	// A PID 1 would ignore it: do not wait 300 s to see that.
	stop := time.AfterFunc(10*time.Second, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	_ = cmd.Wait()
	stop.Stop()
	if ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("SIGINT to the group: %v, want an end by SIGINT", cmd.ProcessState)
	}
}

func TestOffRunsPlainly(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: Off})
	if out, err := run(t, sb, f.root, "touch "+f.outside+"/x && echo $$"); err != nil || out == "1\n" {
		t.Errorf("off: %q, %v", out, err)
	}
	if argv, err := sb.Wrap("/bin/helper", []string{"true"}); err != nil || !slices.Equal(argv, []string{"true"}) {
		t.Errorf("off: Wrap = %q, %v", argv, err)
	}
}

// TestNoCapabilities: a command holds no capability, not even when
// pg-tool runs as root, and cannot raise one by exec.
func TestNoCapabilities(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home})
	// The kernel keyring is out of reach (keyctl fails with EPERM).
	keyctl := fmt.Sprintf(`python3 -c 'import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); r = libc.syscall(%d, 0, -4, 0); sys.exit(0 if r == -1 and ctypes.get_errno() == 1 else "keyctl: %%d %%d" %% (r, ctypes.get_errno()))'`, unix.SYS_KEYCTL)
	if out, err := run(t, sb, f.root, keyctl); err != nil {
		t.Errorf("keyctl: %q, %v", out, err)
	}
	const line = "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/self/status | tr -s '\\t ' ' ' | sort"
	want := "CapAmb: 0000000000000000\nCapBnd: 0000000000000000\nCapEff: 0000000000000000\nCapInh: 0000000000000000\nCapPrm: 0000000000000000\n"
	if os.Geteuid() != 0 {
		want = "" // a user namespace: the bounding set is full but means nothing outside it
	}
	out, err := run(t, sb, f.root, line)
	if err != nil || (want != "" && out != want) || strings.Contains(out, "CapEff: 0000003") {
		t.Errorf("capabilities of a command: %q, %v; want %q", out, err, want)
	}
	argv, err := sb.Wrap(os.Args[0], []string{"bash", "-c", line})
	if err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil || (want != "" && string(b) != want) {
		t.Errorf("capabilities through sandbox-exec: %q, %v; want %q", b, err, want)
	}
}

// TestWarm: Warm starts the launcher thread with its restrictions ahead of
// the first command, which then runs confined as ever; on a sandbox that
// is off or closed it starts nothing.
func TestWarm(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home})
	sb.Warm()
	if sb.reqs == nil {
		t.Fatal("Warm did not start the launcher")
	}
	if out, err := run(t, sb, f.root, "cat "+f.home+"/.ssh/id_ed25519"); err == nil || strings.Contains(out, "FAKE-KEY") {
		t.Errorf("after Warm, a secret was read: %q, %v", out, err)
	}
	if out, err := run(t, sb, f.root, "echo ok > here && cat here"); err != nil || out != "ok\n" {
		t.Errorf("after Warm, a write in the workspace: %q, %v", out, err)
	}

	off, err := New(Policy{Mode: Off})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	off.Warm()
	if off.reqs != nil {
		t.Error("Warm started a launcher for a sandbox that is off")
	}

	closed := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home})
	closed.Close()
	closed.Warm()
	if closed.reqs != nil {
		t.Error("Warm started a launcher for a closed sandbox")
	}
}
