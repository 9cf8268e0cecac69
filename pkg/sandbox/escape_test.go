package sandbox

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"unsafe"

	creack "github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/powerglide/powerglide/pkg/internal/testenv"
)

// The escapes a hostile review found (sandbox4), each tried for real from
// inside the sandbox.

// probeCommand makes the test binary run raw syscalls and print the
// errno of each (0 on success), one a line: `sandbox.test syscall-probe
// "NR ARG..." ...`, each ARG a number, "s:PATH" (a pointer to the string)
// or "fd:PATH" (the path opened read-only). So each syscall of a family is
// tried, not whichever one a tool happens to use, in one process.
const probeCommand = "syscall-probe"

func probe(calls []string) int {
	for _, call := range calls {
		var a [7]uintptr
		for i, arg := range strings.Fields(call) {
			switch {
			case strings.HasPrefix(arg, "s:"):
				p, err := unix.BytePtrFromString(arg[2:])
				if err != nil {
					fmt.Println(err)
					return 2
				}
				a[i] = uintptr(unsafe.Pointer(p))
			case strings.HasPrefix(arg, "fd:"):
				fd, err := unix.Open(arg[3:], unix.O_RDONLY, 0)
				if err != nil {
					fmt.Println("open:", err)
					return 2
				}
				a[i] = uintptr(fd)
			default:
				n, err := strconv.ParseInt(arg, 0, 64)
				if err != nil {
					fmt.Println(err)
					return 2
				}
				a[i] = uintptr(n)
			}
		}
		_, _, errno := unix.Syscall6(a[0], a[1], a[2], a[3], a[4], a[5], a[6])
		fmt.Println(int(errno))
	}
	return 0
}

// TestNoSetuidBit (HIGH-5): Landlock has no right for chmod, so a root
// command set the setuid bit on a root-owned program outside the sandbox,
// a root shell for every local user. No chmod-like syscall may now set
// setuid or setgid, outside the sandbox or in the workspace; other modes
// still change in the workspace.
func TestNoSetuidBit(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home})
	decoy := filepath.Join(f.outside, "decoy")
	mine := filepath.Join(f.root, "mine")
	for _, p := range []string{decoy, mine} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, line := range []string{
		"chmod u+s " + decoy,
		"chmod g+s " + decoy,
		"chmod 4755 " + mine,
		"cp /bin/true setuid-true && chmod 6755 setuid-true",
	} {
		if out, err := run(t, sb, f.root, line); err == nil || !strings.Contains(out, "Operation not permitted") {
			t.Errorf("%s: %q, %v; want Operation not permitted", line, out, err)
		}
	}
	a, _ := thisArch()
	calls := map[string]string{
		"fchmod":    fmt.Sprint(unix.SYS_FCHMOD, " fd:", mine, " 0%o"),
		"fchmodat":  fmt.Sprint(unix.SYS_FCHMODAT, " -100 s:", mine, " 0%o 0"),
		"fchmodat2": fmt.Sprint(unix.SYS_FCHMODAT2, " -100 s:", mine, " 0%o 0"),
	}
	for _, nr := range a.chmod {
		calls["chmod"] = fmt.Sprint(nr, " s:", mine, " 0%o")
	}
	// One process for all: the test binary is slow to start.
	var args, what, want []string
	for name, call := range calls {
		for _, mode := range []int{0o4755, 0o2755, 0o6711, 0o700} {
			args = append(args, fmt.Sprintf("'"+call+"'", mode))
			what = append(what, fmt.Sprintf("%s %o", name, mode))
			if mode == 0o700 {
				want = append(want, "0") // other modes still change in the workspace
			} else {
				want = append(want, "1") // EPERM
			}
		}
	}
	out, err := run(t, sb, f.root, os.Args[0]+" "+probeCommand+" "+strings.Join(args, " "))
	got := strings.Fields(out)
	if err != nil || len(got) != len(want) {
		t.Fatalf("probe: %q, %v", out, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: errno %s, want %s", what[i], got[i], want[i])
		}
	}
	for _, p := range []string{decoy, mine, filepath.Join(f.root, "setuid-true")} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s is %v", p, fi.Mode())
		}
	}
}

// TestNoOwnerChange: no command gives a file another owner or group, not
// even a group the user belongs to (root's supplementary groups, say);
// naming its own owner and group (cp -a, tar as root) still works. Tried
// as root and as uid 65534, through sandbox-exec, which keeps the
// caller's groups. (uid 65534's program runs in a user namespace without a
// mapping, as every sandboxed command of a user but root does: there its
// groups show as nobody's, and naming its own owner fails too, since no
// id is mapped.)
func TestNoOwnerChange(t *testing.T) {
	if os.Getuid() != 0 {
		testenv.Unavailable(t, "running sandbox-exec with other groups", errors.New("not root"))
	}
	f := newFixture(t)
	newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home}) // skips where the sandbox cannot run
	// A directory every user reaches, with the test binary in it: the one
	// in go test's own 0700 directory is root's alone.
	dir, err := os.MkdirTemp("", "sandbox-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(dir, "sandbox.test")
	copyFile(t, os.Args[0], helper, 0o755)
	for _, c := range []struct {
		name     string
		uid, gid int
		other    int // a supplementary group of the caller: not the file's
	}{{"root", 0, 0, 65534}, {"nobody", 65534, 65534, 100}} {
		t.Run(c.name, func(t *testing.T) {
			ws := filepath.Join(dir, c.name)
			tmp := filepath.Join(ws, ".tmp")
			if err := os.MkdirAll(tmp, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{ws, tmp} {
				if err := os.Chown(p, c.uid, c.gid); err != nil {
					t.Fatal(err)
				}
			}
			pol, err := json.Marshal(Policy{Mode: WorkspaceWrite, Root: ws, TempDir: tmp, Home: f.home})
			if err != nil {
				t.Fatal(err)
			}
			sh := func(line string) (string, error) {
				cmd := exec.Command(helper, ExecCommand, "--policy", string(pol), "--", "sh", "-c", line)
				cmd.Dir = ws
				cmd.Env = []string{"PATH=/usr/bin:/bin"}
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.gid), Groups: []uint32{uint32(c.other)}}}
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			if out, err := sh("echo x > f && id -G"); err != nil || (c.uid == 0 && !strings.Contains(out, strconv.Itoa(c.other))) {
				t.Fatalf("setup: %q, %v; want group %d among the caller's", out, err, c.other)
			}
			for _, line := range []string{
				fmt.Sprintf("chgrp %d f", c.other),
				fmt.Sprintf("chown %d f", c.other),
				fmt.Sprintf("chown -h :%d f", c.other),
			} {
				if out, err := sh(line); err == nil || !strings.Contains(out, "Operation not permitted") {
					t.Errorf("%s: %q, %v; want Operation not permitted", line, out, err)
				}
			}
			if fi, err := os.Stat(filepath.Join(ws, "f")); err != nil {
				t.Error(err)
			} else if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != uint32(c.gid) {
				t.Errorf("f's group changed to %d", gid)
			}
			if c.uid != 0 {
				return // no id is mapped in its user namespace
			}
			line := fmt.Sprintf("chown %d:%d f && chown -h %d f && chgrp %d f && cp -a f g && cat g", c.uid, c.gid, c.uid, c.gid)
			if out, err := sh(line); err != nil || out != "x\n" {
				t.Errorf("%s: %q, %v; want it to work", line, out, err)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNoDatagramPair (MEDIUM-5): a datagram socketpair can sendto any
// path-named datagram socket of the machine (SOCK_RAW is one too, for
// AF_UNIX); stream and seqpacket pairs stay, they reach no one.
func TestNoDatagramPair(t *testing.T) {
	f := newFixture(t)
	sock := filepath.Join(f.outside, "dgram.sock")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 64)
		if n, _, err := l.ReadFrom(b); err == nil {
			got <- string(b[:n])
		}
	}()
	for _, allowNet := range []bool{false, true} {
		sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home, AllowNet: allowNet})
		line := `python3 -c '
import socket
for t in (socket.SOCK_DGRAM, socket.SOCK_RAW, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC):
    try:
        a, b = socket.socketpair(socket.AF_UNIX, t)
        a.sendto(b"escaped", "` + sock + `")
        print("sent through", t)
    except PermissionError:
        print("refused")
for t in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
    a, b = socket.socketpair(socket.AF_UNIX, t)
    a.send(b"y")
    print(b.recv(1).decode())
'`
		if out, err := run(t, sb, f.root, line); err != nil || out != "refused\nrefused\nrefused\ny\ny\n" {
			t.Errorf("allow-net %v: %q, %v", allowNet, out, err)
		}
	}
	select {
	case m := <-got:
		t.Errorf("the datagram socket outside got %q", m)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestAllowNetNoUnixSockets (MEDIUM-2): --allow-net opens TCP and UDP,
// never unix sockets, which Landlock does not check by path: a pty
// holder's socket under the hidden data root ran commands unconfined.
func TestAllowNetNoUnixSockets(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home, AllowNet: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sock := filepath.Join(f.outside, "holder.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	abstract := "@pg-sandbox-test-" + strconv.Itoa(os.Getpid())
	al, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	unixConns := make(chan string, 2)
	for _, l := range []net.Listener{ul, al} {
		go func() {
			if c, err := l.Accept(); err == nil {
				unixConns <- c.LocalAddr().String()
				c.Close()
			}
		}()
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("tcp ok\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	if out, err := run(t, sb, f.root, fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && head -1 <&3", port)); err != nil || out != "tcp ok\n" {
		t.Errorf("TCP with --allow-net: %q, %v", out, err)
	}
	for _, addr := range []string{sock, "\\0" + abstract[1:]} {
		line := `python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect("` + addr + `")'`
		if out, err := run(t, sb, f.root, line); err == nil || !strings.Contains(out, "PermissionError") {
			t.Errorf("unix connect to %s with --allow-net: %q, %v", addr, out, err)
		}
	}
	select {
	case a := <-unixConns:
		t.Errorf("a unix socket connection reached %s", a)
	case <-time.After(100 * time.Millisecond):
	}
	if r := sb.Report(nil); !strings.Contains(fmt.Sprint(r.Rules), "no unix sockets") {
		t.Errorf("report rules do not say unix sockets stay closed: %v", r.Rules)
	}
}

// startCommand makes the test binary start one command through
// Sandbox.Start, as pg-tool does, and print its output once it ended:
// `sandbox.test sandbox-start POLICY ARGV...`. Run on a terminal, it
// stands for a pg-tool started from the user's shell.
const startCommand = "sandbox-start"

func startHelper(policy string, argv []string) int {
	var p Policy
	if err := json.Unmarshal([]byte(policy), &p); err != nil {
		fmt.Println(err)
		return 2
	}
	sb, err := New(p)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	defer sb.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := sb.Start(cmd); err != nil {
		fmt.Println(err)
		return 2
	}
	err = cmd.Wait()
	fmt.Printf("output: %q, %v\n", out.String(), err)
	return 0
}

// victimTerminal opens a pseudo-terminal that stands for one of the
// user's terminals: the user typed line into it. It returns its path and
// a function that returns what was written to it since (the echo of the
// typed line included).
func victimTerminal(t *testing.T, line string) (string, func() string) {
	t.Helper()
	master, slave, err := creack.Open()
	if err != nil {
		testenv.Unavailable(t, "a pseudo-terminal", err)
	}
	t.Cleanup(func() { master.Close(); slave.Close() })
	if _, err := master.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	return slave.Name(), func() string { return drain(t, master) }
}

// drain returns what the terminal's master holds to be read.
func drain(t *testing.T, master *os.File) string {
	t.Helper()
	fd := int(master.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	var out []byte
	b := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, b)
		if n <= 0 || err != nil {
			return string(out)
		}
		out = append(out, b[:n]...)
	}
}

// The command lines below print their marker with printf 'IN%sED' JECT,
// so only a write that got through shows INJECTED.

// TestNoOtherTerminals (HIGH-4): /dev/pts was granted whole, so a command
// wrote escape sequences to the user's other terminals and read the keys
// typed there.
func TestNoOtherTerminals(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home})
	victim, written := victimTerminal(t, "hunter2")
	for _, line := range []string{
		"printf 'IN%sED\\n' JECT > " + victim,
		"head -c 7 " + victim,
		"python3 -c 'import os; os.open(\"" + victim + "\", os.O_RDONLY)'",
	} {
		if out, err := run(t, sb, f.root, line); err == nil || strings.Contains(out, "hunter2") || (!strings.Contains(out, "ermission denied") && !strings.Contains(out, "PermissionError")) {
			t.Errorf("%s: %q, %v; want permission denied", line, out, err)
		}
	}
	if got := written(); strings.Contains(got, "INJECTED") {
		t.Errorf("the user's terminal got %q", got)
	}
	// A terminal of its own is out of reach too: Landlock checks the other
	// end of /dev/ptmx by its path in /dev/pts, even through TIOCGPTPEER.
	if out, err := run(t, sb, f.root, "script -qec 'echo in-a-pty' /dev/null"); err == nil || strings.Contains(out, "in-a-pty") {
		t.Errorf("script made a terminal: %q, %v", out, err)
	}
}

// TestNoTerminalOfTheCaller: a command pg-tool starts has no controlling
// terminal, so its /dev/tty is not the terminal the user started pg-tool
// (or pg-loop) in; a program through sandbox-exec that is not its
// terminal's session leader (an MCP server) is detached from it too. A
// pg-pty program, which leads its session, opens its own terminal by path
// and no other.
func TestNoTerminalOfTheCaller(t *testing.T) {
	f := newFixture(t)
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home})
	pol, err := json.Marshal(sb.Policy())
	if err != nil {
		t.Fatal(err)
	}
	onTerminal := func(argv ...string) string {
		t.Helper()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = f.root
		master, err := creack.Start(cmd)
		if err != nil {
			testenv.Unavailable(t, "a pseudo-terminal", err)
		}
		defer master.Close()
		var out []byte
		done := make(chan struct{})
		go func() { out, _ = io.ReadAll(master); close(done) }() // EIO once the terminal is closed
		cmd.Wait()
		<-done
		return string(out)
	}
	inject := "printf 'IN%sED\\n' JECT > /dev/tty; echo tty-$?"
	start := []string{os.Args[0], startCommand, string(pol), "bash", "-c", inject}
	// pg-tool as the leader of its terminal's session (each command gets a
	// session of its own), and as one process of a shell's session (it
	// lets go of the terminal).
	for _, argv := range [][]string{start, {"sh", "-c", shellQuote(start) + "; true"}} {
		out := onTerminal(argv...)
		if strings.Contains(out, "INJECTED") || !strings.Contains(out, "tty-1") {
			t.Errorf("a command started from a terminal (%s) wrote to it: %q", argv[0], out)
		}
	}
	argv, err := sb.Wrap(os.Args[0], []string{"bash", "-c", inject})
	if err != nil {
		t.Fatal(err)
	}
	out := onTerminal("sh", "-c", shellQuote(argv)+"; true")
	if strings.Contains(out, "INJECTED") || !strings.Contains(out, "tty-1") {
		t.Errorf("a sandbox-exec program outside its terminal's session wrote to it: %q", out)
	}
	victim, written := victimTerminal(t, "hunter2")
	argv, err = sb.Wrap(os.Args[0], []string{"bash", "-c", "printf 'OW%s\\n' N > $(tty); echo own-$?; printf 'IN%sED\\n' JECT > " + victim + "; echo other-$?"})
	if err != nil {
		t.Fatal(err)
	}
	out = onTerminal(argv...)
	if !strings.Contains(out, "OWN") || !strings.Contains(out, "own-0") || !strings.Contains(out, "other-1") {
		t.Errorf("a pg-pty program: %q; want its own terminal and no other", out)
	}
	if got := written(); strings.Contains(got, "INJECTED") {
		t.Errorf("the user's terminal got %q", got)
	}
}

func shellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// TestCommonSecretsHidden (MEDIUM-3): the credential stores the first list
// missed (git, gh, kubectl, npm, pip, cargo, PostgreSQL, Azure, pass,
// keyrings, browser profiles, shell histories) are unreadable, under
// $HOME and under the passwd entry's home when that differs (LOW-6).
func TestCommonSecretsHidden(t *testing.T) {
	f := newFixture(t)
	account := filepath.Join(filepath.Dir(f.home), "account")
	var secrets []string
	for _, home := range []string{f.home, account} {
		for _, rel := range []string{
			".git-credentials", ".config/git/credentials", ".config/gh/hosts.yml", ".kube/config", ".npmrc", ".pypirc",
			".pgpass", ".azure/accessTokens.json", ".password-store/mail.gpg", ".local/share/keyrings/login.keyring",
			".cargo/credentials.toml", ".cargo/credentials", ".bash_history", ".zsh_history", ".python_history",
			".psql_history", ".mozilla/firefox/p/cookies.sqlite", ".config/google-chrome/Default/Cookies",
			".config/chromium/Default/Cookies", ".ssh/id_ed25519",
		} {
			p := filepath.Join(home, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("SECRET-"+rel+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			secrets = append(secrets, p)
		}
	}
	// Beside them, what tools need stays readable.
	for _, p := range []string{filepath.Join(f.home, ".config/git/config"), filepath.Join(account, ".gitconfig")} {
		if err := os.WriteFile(p, []byte("[user]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home, AccountHome: account})
	for _, p := range secrets {
		if out, err := run(t, sb, f.root, "cat "+p); err == nil || strings.Contains(out, "SECRET") {
			t.Errorf("cat %s: %q, %v", p, out, err)
		}
	}
	if out, err := run(t, sb, f.root, "cat "+f.home+"/.config/git/config "+account+"/.gitconfig"); err != nil || out != "[user]\n[user]\n" {
		t.Errorf("the git configs beside the secrets: %q, %v", out, err)
	}
	r := sb.Report(nil)
	for _, p := range []string{filepath.Join(f.home, ".git-credentials"), filepath.Join(account, ".config/gh"), filepath.Join(account, ".ssh")} {
		if !slices.Contains(r.Hidden, p) {
			t.Errorf("report hidden lacks %s: %v", p, r.Hidden)
		}
	}
}

// TestCachesAreTheSandboxsOwn (HIGH-2): the user's build caches were
// writable, so a command planted code in a module's source in GOMODCACHE
// that the user's next `go run` ran, unsandboxed. Commands now write the
// sandbox's own caches, and read the user's: a module the user has still
// builds offline, fetched from the user's module cache.
func TestCachesAreTheSandboxsOwn(t *testing.T) {
	testenv.Need(t, "scripts/test-deps.sh installs it", "go")
	f := newFixture(t)
	work := filepath.Dir(f.root)
	// A one-module proxy, and the user's module cache filled from it by a
	// real go mod tidy outside the sandbox.
	proxy := filepath.Join(work, "proxy", "example.com", "tiny", "@v")
	if err := os.MkdirAll(proxy, 0o755); err != nil {
		t.Fatal(err)
	}
	zipModule(t, filepath.Join(proxy, "v1.0.0.zip"), "example.com/tiny@v1.0.0/", map[string]string{
		"go.mod":  "module example.com/tiny\n\ngo 1.22\n",
		"tiny.go": "package tiny\n\nfunc N() int { return 42 }\n",
	})
	for name, content := range map[string]string{
		"list": "v1.0.0\n", "v1.0.0.info": `{"Version":"v1.0.0","Time":"2024-01-01T00:00:00Z"}`, "v1.0.0.mod": "module example.com/tiny\n\ngo 1.22\n",
	} {
		if err := os.WriteFile(filepath.Join(proxy, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{
		"go.mod":     "module example.com/app\n\ngo 1.22\n\nrequire example.com/tiny v1.0.0\n",
		"lib/lib.go": "package lib\n\nimport \"example.com/tiny\"\n\nfunc M() int { return tiny.N() }\n",
	} {
		p := filepath.Join(f.root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	userModCache := filepath.Join(f.home, "go", "pkg", "mod")
	// Module caches are read-only; let the test's clean-up remove them.
	t.Cleanup(func() {
		filepath.WalkDir(work, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
	})
	userGoCache := filepath.Join(f.home, ".cache", "go-build")
	env := append(os.Environ(), "HOME="+f.home, "GOMODCACHE="+userModCache, "GOCACHE="+userGoCache, "GOPATH=",
		"GONOSUMDB=example.com", "GOTOOLCHAIN=local", "GOFLAGS=", "XDG_CACHE_HOME=")
	tidy := exec.Command("go", "mod", "tidy")
	tidy.Dir = f.root
	tidy.Env = append(env, "GOPROXY=file://"+filepath.Join(work, "proxy"))
	if out, err := tidy.CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy outside the sandbox: %v\n%s", err, out)
	}
	source := filepath.Join(userModCache, "example.com", "tiny@v1.0.0", "tiny.go")
	before, err := os.ReadFile(source)
	if err != nil {
		t.Fatal(err)
	}

	env = append(env, "GOPROXY=off") // the user's: no network at all
	getenv := func(name string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], name+"="); ok {
				return v
			}
		}
		return ""
	}
	own := filepath.Join(work, "sandbox-cache")
	caches, cacheEnv, err := Caches(getenv, f.home, own)
	if err != nil {
		t.Fatal(err)
	}
	sb := newSandbox(t, Policy{Mode: WorkspaceWrite, Root: f.root, Home: f.home, Caches: caches, CacheEnv: cacheEnv})
	sh := func(line string) (string, error) {
		cmd := exec.Command("bash", "-c", line)
		cmd.Dir = f.root
		cmd.Env = sb.Env(env, nil)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := sb.Start(cmd); err != nil {
			return "", err
		}
		err := cmd.Wait()
		return out.String(), err
	}
	// The planting of the review: make the module's source writable and
	// add an init to it; and the same in the user's build cache and ~/.cache.
	for _, line := range []string{
		"chmod u+w " + filepath.Dir(source) + " " + source + "; echo 'func init() { println(\"planted\") }' >> " + source,
		"mkdir -p " + userGoCache + " 2>/dev/null; touch " + userGoCache + "/planted",
		"touch " + f.home + "/.cache/planted",
	} {
		if out, err := sh(line); err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("%s: %q, %v; want Permission denied", line, out, err)
		}
	}
	if after, _ := os.ReadFile(source); string(after) != string(before) {
		t.Errorf("the user's module source changed: %q", after)
	}
	out, err := sh("go env GOCACHE GOMODCACHE GOPROXY && go build ./lib && echo built")
	wantEnv := filepath.Join(own, "go-build") + "\n" + filepath.Join(own, "go-mod") + "\nfile://" + filepath.Join(userModCache, "cache", "download") + ",off\n"
	if err != nil || !strings.HasPrefix(out, wantEnv) || !strings.HasSuffix(out, "\nbuilt\n") {
		t.Errorf("go build in the sandbox: %q, %v; want %q, then built", out, err, wantEnv)
	}
	if _, err := os.Stat(filepath.Join(own, "go-mod", "example.com", "tiny@v1.0.0", "tiny.go")); err != nil {
		t.Errorf("the module is not in the sandbox's own module cache: %v", err)
	}
}

// zipModule writes a module zip: every file under prefix.
func zipModule(t *testing.T, path, prefix string, files map[string]string) {
	t.Helper()
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(out)
	for name, content := range files {
		w, err := z.Create(prefix + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
