package agent_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/agent"
	"github.com/powerglide/powerglide/pkg/store/dial"
)

// TestClientSecretsRedactedBeforeTheAgent: a command's own secrets (its
// environment, its config file's keys, registered at start) are redacted
// before the request leaves it. The agent redacts only with the secrets of
// the command that started it, so without this a later command's secret
// reached the team store in clear; directly, the same add is redacted.
func TestClientSecretsRedactedBeforeTheAgent(t *testing.T) {
	withHome(t, 30*time.Second)
	const value = "plainvalue-abc-123456"
	// This process (the client) knows the secret, as pg-queue does when
	// DEPLOY_TOKEN is in its environment; the agent, started from
	// os.Environ(), does not.
	secrets.Register(secrets.Secret{Name: "DEPLOY_TOKEN", Value: value})
	for _, via := range []string{"direct", "agent"} {
		t.Run(via, func(t *testing.T) {
			dir := t.TempDir()
			url := "file:" + dir
			open := func(url string) (store.Store, error) { return dial.Open(url, "") }
			if via == "agent" {
				open = openAgent
			}
			st, err := open(url)
			if err != nil {
				t.Fatal(err)
			}
			tm, err := st.Team("t")
			if err != nil {
				t.Fatal(err)
			}
			tasksAdd := tm.Tasks().Add
			defer st.Close()
			if _, err := tasksAdd([]protocol.Task{{Title: "deploy", Prompt: "deploy with token " + value}}); err != nil {
				t.Fatal(err)
			}
			d, err := dial.Open(url, "")
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			dt, _ := d.Team("t")
			ts, err := dt.Tasks().List(queue.ListOptions{})
			if err != nil || len(ts) != 1 {
				t.Fatalf("list: %v %v", ts, err)
			}
			if strings.Contains(ts[0].Prompt, value) {
				t.Errorf("%s: the stored prompt holds the client's secret: %q", via, ts[0].Prompt)
			}
		})
	}
}

// TestOpenDoesNotWaitForTheStartLock: while another command holds the
// start lock (it waits for its agent, up to the start timeout, on a
// database that may hang), Open neither blocks on the lock without bound
// nor ignores its context: it gives up at once and the command connects
// directly.
func TestOpenDoesNotWaitForTheStartLock(t *testing.T) {
	home := withHome(t, 30*time.Second)
	url := "file:" + t.TempDir()
	path := socketPath(home, url)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	lk := flock.New(strings.TrimSuffix(path, ".sock") + ".lock")
	if err := lk.Lock(); err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		c, err := agent.Open(ctx, options(url))
		if c != nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("agent.Open still waits for the start lock 5 s after its context ended")
		lk.Unlock()
		<-done
		return
	}
	// A context that never ends: the wait is bounded all the same.
	o := options(url)
	o.LockWait = 100 * time.Millisecond
	go func() {
		c, err := agent.Open(context.Background(), o)
		if c != nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("agent.Open reached an agent while another command held the start lock")
		}
	case <-time.After(5 * time.Second):
		t.Error("agent.Open waits for the start lock without bound")
		lk.Unlock()
		<-done
	}
}

// fakeAgentEnv makes this test binary a listener of another user that
// greets like an agent (TestClientRefusesAgentOfAnotherUser).
const fakeAgentEnv = "AGENTTEST_FAKE_AGENT"

func init() {
	if os.Getenv(fakeAgentEnv) == "" {
		return
	}
	dir, err := os.MkdirTemp("", "fake-agent-")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	path := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(path)
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(0)
		}
		fmt.Fprintf(c, `{"type":"hello","protocol":%d,"store":"file","pid":%d}`+"\n", protocol.StoreAgentProtocol, os.Getpid())
	}
}

// TestClientRefusesAgentOfAnotherUser: the client asks the kernel who
// listens (SO_PEERCRED) and refuses a listener of another uid, whatever
// the names say. Whoever can rename entries in the data root could swap
// run/ between the client's checks by path and its connect; the end state
// of that race is built here: a private socket file of ours whose listener
// is uid 65534.
func TestClientRefusesAgentOfAnotherUser(t *testing.T) {
	needRoot(t)
	home := withHome(t, time.Minute)
	url := "file:" + t.TempDir()
	path := socketPath(home, url)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	cp := filepath.Join(dir, "fake")
	if err := os.WriteFile(cp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cp)
	cmd.Env = append(os.Environ(), fakeAgentEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "/") {
		t.Fatalf("fake agent: %q %v", line, err)
	}
	fake := strings.TrimSpace(line)
	defer os.RemoveAll(filepath.Dir(fake))
	// What the client sees by name after the swap: our own private socket.
	if err := os.Rename(fake, path); err != nil {
		t.Fatal(err)
	}
	os.Lchown(path, os.Getuid(), os.Getgid())
	os.Chmod(path, 0o600)
	o := options(url)
	o.Path = "" // connect only
	c, err := agent.Open(context.Background(), o)
	if err == nil {
		defer c.Close()
		t.Errorf("the client talks to a listener of uid 65534 (hello pid %d, the fake is %d)", c.Hello().PID, cmd.Process.Pid)
	}
}

// TestAgentKeepsNoInheritedDescriptors: an agent started by a command
// holds none of the descriptors the command inherited, only 0-2 and its
// readiness pipe. `( pg-queue stats 5>&1 >/dev/null ) | cat` waited for
// the agent's idle exit, as the agent held the pipe's write end.
func TestAgentKeepsNoInheritedDescriptors(t *testing.T) {
	withHome(t, time.Minute)
	var p [2]int
	// Inheritable, as a shell gives a command its redirections.
	if err := unix.Pipe2(p[:], 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	c := mustOpen(t, options("file:"+t.TempDir()))
	unix.Close(p[1])
	if err := unix.SetNonblock(p[0], true); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Read(p[0], make([]byte, 1)); err == unix.EAGAIN {
		t.Errorf("agent %d holds the write end of a pipe its starter inherited", c.Hello().PID)
	}
}

// TestAgentHoldsNoKeys: a host's agent outlives the command that started
// it; it gets that command's environment without the model keys and
// tokens (pg-loop holds them for pg-llm), but with libpq's PGPASSWORD,
// which it connects with.
func TestAgentHoldsNoKeys(t *testing.T) {
	withHome(t, time.Minute)
	o := options("file:" + t.TempDir())
	o.Env = append(o.Env, "ANTHROPIC_API_KEY=sk-ant-agent-test", "GITHUB_TOKEN=ghp_agent_test", "PGPASSWORD=db-pass-agent-test")
	c := mustOpen(t, o)
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", c.Hello().PID))
	if err != nil {
		t.Fatal(err)
	}
	env := "\x00" + string(raw)
	for _, gone := range []string{"ANTHROPIC_API_KEY=", "GITHUB_TOKEN="} {
		if strings.Contains(env, "\x00"+gone) {
			t.Errorf("agent %d holds %s", c.Hello().PID, strings.TrimSuffix(gone, "="))
		}
	}
	if !strings.Contains(env, "\x00PGPASSWORD=db-pass-agent-test\x00") {
		t.Errorf("agent %d lost PGPASSWORD, which it connects with", c.Hello().PID)
	}
}

// TestUpgradedBinaryStartsItsOwnAgent: after pg-queue is replaced (an
// upgrade moves a new binary into place), its commands start and use an
// agent of the new binary instead of the old binary's agent, which kept
// serving them for as long as it had clients.
func TestUpgradedBinaryStartsItsOwnAgent(t *testing.T) {
	withHome(t, time.Minute)
	url := "file:" + t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "pg-queue")
	install := func() {
		if err := os.WriteFile(bin+".new", b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(bin+".new", bin); err != nil {
			t.Fatal(err)
		}
	}
	install()
	o := options(url)
	o.Path, o.Args = bin, []string{bin}
	old := mustOpen(t, o).Hello().PID
	install()
	if pid := mustOpen(t, o).Hello().PID; pid == old {
		t.Errorf("the upgraded binary's command reached the old binary's agent %d", old)
	}
}

// TestHostsGetAgentsOfTheirOwn: a data root shared between hosts (an NFS
// home), or between network namespaces, names another agent on each: the
// key holds the host name, the boot id and the network namespace.
func TestHostsGetAgentsOfTheirOwn(t *testing.T) {
	needRoot(t)
	home := withHome(t, time.Minute)
	url := "file:" + t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	seen := func(flags uintptr, hostname string) string {
		t.Helper()
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), socketPathEnv+"="+url, "AGENTTEST_HOSTNAME="+hostname)
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	here := socketPath(home, url)
	if got := seen(0, ""); got != here {
		t.Fatalf("another process of this host: %s, want %s", got, here)
	}
	if got := seen(syscall.CLONE_NEWUTS, "another-host"); got == here {
		t.Errorf("a host of another name shares the agent %s", got)
	}
	if got := seen(syscall.CLONE_NEWNET, ""); got == here {
		t.Errorf("another network namespace shares the agent %s", got)
	}
}

// printSocketPath is a process of TestHostsGetAgentsOfTheirOwn: it names
// itself $AGENTTEST_HOSTNAME, when set, and prints the socket of url.
func printSocketPath(url string) int {
	if h := os.Getenv("AGENTTEST_HOSTNAME"); h != "" {
		if err := unix.Sethostname([]byte(h)); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	fmt.Println(socketPath(os.Getenv(homeEnv), url))
	return 0
}
