package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/internal/testenv"
	"github.com/powerglide/powerglide/pkg/internal/testnet"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/agent"
	"github.com/powerglide/powerglide/pkg/store/dial"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
	"github.com/powerglide/powerglide/pkg/store/remote"
)

// Many first commands at once, each a process of its own, start exactly
// one agent: they take turns at the flock beside the socket, and all reach
// the one agent.
func TestAutoStartRace(t *testing.T) {
	home := withHome(t, time.Minute)
	url := "file:" + t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	cmds := make([]*exec.Cmd, n)
	outs := make([]*strings.Builder, n)
	for i := range cmds {
		outs[i] = new(strings.Builder)
		cmds[i] = exec.Command(exe)
		cmds[i].Env = append(os.Environ(), commandEnv+"="+url)
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
	}
	for _, c := range cmds { // all started before any is waited for
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	pids := map[string]int{}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("command %d: %v: %s", i, err, outs[i])
		}
		pids[strings.TrimSpace(outs[i].String())]++
	}
	if len(pids) != 1 {
		t.Fatalf("the commands reached several agents: %v", pids)
	}
	log, err := os.ReadFile(strings.TrimSuffix(socketPath(home, url), ".sock") + ".log")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(log), ": serving "); got != 1 {
		t.Fatalf("%d agents started, want 1; log:\n%s", got, log)
	}
	c := mustOpen(t, options(url))
	tm, _ := c.Team("t")
	ts, err := tm.Tasks().List(queue.ListOptions{})
	if err != nil || len(ts) != n {
		t.Fatalf("%d tasks (%v), want %d", len(ts), err, n)
	}
}

// firstCommand is a process of TestAutoStartRace: it adds a task through
// the agent of url and prints the agent's pid.
func firstCommand(url string) int {
	c, err := agent.Open(context.Background(), options(url))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer c.Close()
	tm, err := c.Team("t")
	if err == nil {
		_, err = tm.Tasks().Add([]protocol.Task{{Title: "task"}})
	}
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println(c.Hello().PID)
	return 0
}

// An agent killed with SIGKILL while commands run loses nothing and does
// nothing twice: a call it did not answer runs on the direct store when
// it may (claim, complete), and the next command starts a new agent over
// the stale socket. Every task ends done exactly once.
func TestKillAgentMidRun(t *testing.T) {
	withHome(t, time.Minute)
	url := pgtest.DB(t)
	o := options(url)
	o.Direct = func() (store.Store, error) {
		return dial.OpenContext(context.Background(), url, dial.Options{OneShot: true})
	}
	const tasks = 60
	seed := mustOpen(t, o)
	tm, err := seed.Team("t")
	if err != nil {
		t.Fatal(err)
	}
	in := make([]protocol.Task, tasks)
	for i := range in {
		in[i] = protocol.Task{ID: fmt.Sprintf("k%02d", i), Title: "k"}
	}
	if _, err := tm.Tasks().Add(in); err != nil {
		t.Fatal(err)
	}
	killed := map[int]bool{}
	var mu sync.Mutex
	commands := 0
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("w", w)
			for {
				done, pid, err := command(o, name)
				if err != nil {
					errs <- err
					return
				}
				if done {
					return
				}
				// Every eighth command of the run, whichever worker made
				// it, kills the agent it used (not a worker's own count:
				// on a fast machine the others drain the queue before one
				// worker has made many).
				mu.Lock()
				commands++
				if commands%8 == 0 && pid > 0 && !killed[pid] {
					killed[pid] = true
					syscall.Kill(pid, syscall.SIGKILL)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(killed) < 2 {
		t.Fatalf("only %d agents killed", len(killed))
	}
	direct, err := o.Direct()
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	dt, _ := direct.Team("t")
	ts, err := dt.Tasks().List(queue.ListOptions{Archived: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range ts {
		if tk.Status != protocol.StatusDone {
			t.Errorf("task %s is %s", tk.ID, tk.Status)
		}
	}
	if len(ts) != tasks {
		t.Fatalf("%d tasks, want %d", len(ts), tasks)
	}
	// Each task completed once: one complete event each. The journal is
	// read up to a record appended now, so every record before it is read
	// however slowly the follower goes.
	if err := dt.Journal().Append(t.Context(), map[string]string{"type": "test", "op": "end"}); err != nil {
		t.Fatal(err)
	}
	f, err := dt.Journal().Follow(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	completes := map[string]int{}
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		b, err := f.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("read the journal: %v", err)
		}
		var ev protocol.TaskEvent
		json.Unmarshal(b, &ev)
		if ev.Type == "test" {
			break
		}
		if ev.Op == "complete" {
			completes[ev.Task]++
		}
	}
	for _, tk := range ts {
		if completes[tk.ID] != 1 {
			t.Errorf("task %s completed %d times", tk.ID, completes[tk.ID])
		}
	}
}

// command is one pg-queue-like command pair: open a client, claim and
// complete one task. It reports done when the queue is drained, and the
// pid of the agent it reached.
func command(o agent.OpenOptions, worker string) (done bool, pid int, err error) {
	c, err := agent.Open(context.Background(), o)
	if err != nil {
		return false, 0, err
	}
	defer c.Close()
	tm, err := c.Team("t")
	if err != nil {
		return false, 0, err
	}
	q := tm.Tasks()
	tk, err := q.Claim(worker, 2*time.Second)
	if errors.Is(err, queue.ErrNothing) {
		st, serr := q.Stats()
		if serr != nil {
			return false, 0, serr
		}
		if st.Drained {
			return true, c.Hello().PID, nil
		}
		// A claim lost with a killed agent holds its task until the
		// lease ends: wait for a claimable task as a worker would.
		tk, err = q.WaitClaim(context.Background(), worker, 2*time.Second, 5*time.Second)
		if errors.Is(err, queue.ErrNothing) {
			return false, c.Hello().PID, nil
		}
	}
	if err != nil {
		return false, 0, fmt.Errorf("claim: %w", err)
	}
	if _, err := q.Complete(tk.ID, tk.Claim.Token, json.RawMessage(`{"by":"`+worker+`"}`)); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
		return false, 0, fmt.Errorf("complete %s: %w", tk.ID, err)
	}
	return false, c.Hello().PID, nil
}

// An agent exits when its socket is removed (its data root deleted), when
// another replaces it, and after its idle period with no client.
func TestAgentExits(t *testing.T) {
	t.Run("socket removed", func(t *testing.T) {
		home := withHome(t, time.Minute)
		url := "file:" + t.TempDir()
		c := mustOpen(t, options(url))
		pid := c.Hello().PID
		if err := os.Remove(socketPath(home, url)); err != nil {
			t.Fatal(err)
		}
		c.Close()
		waitExit(t, pid, 10*time.Second)
	})
	t.Run("home removed", func(t *testing.T) {
		home := withHome(t, time.Minute)
		url := "file:" + t.TempDir()
		c := mustOpen(t, options(url))
		pid := c.Hello().PID
		c.Close()
		if err := os.RemoveAll(home); err != nil {
			t.Fatal(err)
		}
		waitExit(t, pid, 10*time.Second)
	})
	t.Run("socket replaced", func(t *testing.T) {
		home := withHome(t, time.Minute)
		url := "file:" + t.TempDir()
		c := mustOpen(t, options(url))
		pid := c.Hello().PID
		c.Close()
		// A second agent of the same store (started by hand) takes the
		// name over; the first one leaves.
		path := socketPath(home, url)
		os.Rename(path, path+".old")
		c2 := mustOpen(t, options(url))
		if c2.Hello().PID == pid {
			t.Fatal("no new agent")
		}
		waitExit(t, pid, 10*time.Second)
		if !alive(c2.Hello().PID) {
			t.Fatal("the new agent exited too")
		}
	})
	// A stop says so in the log, as the other exits do: the log tells
	// why an agent ended.
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			home := withHome(t, time.Minute)
			url := "file:" + t.TempDir()
			c := mustOpen(t, options(url))
			pid := c.Hello().PID
			c.Close()
			if err := syscall.Kill(pid, sig); err != nil {
				t.Fatal(err)
			}
			waitExit(t, pid, 10*time.Second)
			log, err := os.ReadFile(strings.TrimSuffix(socketPath(home, url), ".sock") + ".log")
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("store agent %d: told to stop (interrupted by %s), exiting\n", pid, sig)
			if !strings.Contains(string(log), want) {
				t.Fatalf("log:\n%s\nwant the line %q", log, want)
			}
		})
	}
	t.Run("idle", func(t *testing.T) {
		withHome(t, 200*time.Millisecond)
		url := "file:" + t.TempDir()
		c := mustOpen(t, options(url))
		pid := c.Hello().PID
		// Busy while a client is connected, however long.
		tm, _ := c.Team("t")
		if _, err := tm.Tasks().Add([]protocol.Task{{Title: "x"}}); err != nil {
			t.Fatal(err)
		}
		c.Close()
		waitExit(t, pid, 10*time.Second)
	})
}

// A socket file left by a dead agent is replaced by the next agent.
func TestStaleSocket(t *testing.T) {
	home := withHome(t, time.Minute)
	url := "file:" + t.TempDir()
	path := socketPath(home, url)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // no one listens: what a SIGKILLed agent leaves
	os.Chmod(path, 0o600)
	c := mustOpen(t, options(url))
	if c.Hello().PID == os.Getpid() || c.Hello().Store != "file" {
		t.Fatalf("hello %+v", c.Hello())
	}
}

// Anything of the user's own at the socket's name that is not a socket
// (a stray `: > store-<k>.sock`, a named pipe, a link, an empty
// directory) is replaced by a new agent's socket, instead of keeping every
// agent off for good. A link goes, not what it names.
func TestNonSocketAtSocketPath(t *testing.T) {
	cases := []struct {
		name string
		make func(t *testing.T, path string) error
	}{
		{"regular file", func(t *testing.T, path string) error { return os.WriteFile(path, nil, 0o600) }},
		{"named pipe", func(t *testing.T, path string) error { return syscall.Mkfifo(path, 0o600) }},
		{"empty directory", func(t *testing.T, path string) error { return os.Mkdir(path, 0o700) }},
		{"link to a file", func(t *testing.T, path string) error {
			target := filepath.Join(filepath.Dir(path), "target")
			if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
				return err
			}
			return os.Symlink(target, path)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := withHome(t, time.Minute)
			url := "file:" + t.TempDir()
			path := socketPath(home, url)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(t, path); err != nil {
				t.Fatal(err)
			}
			c := mustOpen(t, options(url))
			if c.Hello().PID == os.Getpid() || c.Hello().Store != "file" {
				t.Fatalf("hello %+v", c.Hello())
			}
			fi, err := os.Lstat(path)
			if err != nil || fi.Mode().Type() != os.ModeSocket {
				t.Fatalf("%s is not the agent's socket: %v %v", path, fi.Mode(), err)
			}
			if b, err := os.ReadFile(filepath.Join(filepath.Dir(path), "target")); err == nil && string(b) != "keep" {
				t.Errorf("the link's target was changed: %q", b)
			}
			c.Close()
			os.RemoveAll(home)
			waitExit(t, c.Hello().PID, 10*time.Second)
		})
	}
}

// A run directory or socket that another user owns, or that others may
// use, is refused: the command then connects directly.
func TestRefusedSockets(t *testing.T) {
	needRoot(t)
	cases := []struct {
		name  string
		spoil func(t *testing.T, dir, path string)
	}{
		{"loose socket", func(t *testing.T, dir, path string) { os.Chmod(path, 0o666) }},
		{"loose directory", func(t *testing.T, dir, path string) { os.Chmod(dir, 0o755) }},
		{"socket of another user", func(t *testing.T, dir, path string) { os.Lchown(path, 65534, 65534) }},
		{"directory of another user", func(t *testing.T, dir, path string) { os.Lchown(dir, 65534, 65534) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := withHome(t, time.Minute)
			url := "file:" + t.TempDir()
			c := mustOpen(t, options(url))
			pid := c.Hello().PID
			c.Close()
			path := socketPath(home, url)
			tc.spoil(t, filepath.Dir(path), path)
			_, err := agent.Open(context.Background(), options(url))
			if !errors.Is(err, agent.ErrRefused) {
				t.Fatalf("open: %v, want it refused", err)
			}
			if !alive(pid) {
				t.Fatal("the agent died")
			}
			os.RemoveAll(home)
			waitExit(t, pid, 10*time.Second)
		})
	}
}

// The agent refuses peers of another user (SO_PEERCRED).
func TestRefusesOtherUser(t *testing.T) {
	needRoot(t)
	home := withHome(t, time.Minute)
	url := "file:" + t.TempDir()
	c := mustOpen(t, options(url))
	c.Close()
	path := socketPath(home, url)
	// Let nobody reach the socket, then connect as nobody from a child:
	// the agent hangs up without a hello.
	for d := filepath.Dir(path); d != filepath.Dir(filepath.Dir(home)); d = filepath.Dir(d) {
		os.Chmod(d, 0o711)
	}
	os.Chmod(path, 0o666)
	out, err := runAs(t, 65534, path)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(out, `"hello"`) {
		t.Fatalf("the agent greeted another user: %s", out)
	}
}

// needRoot: only root makes files of another user and runs as one. Under
// CI=true a test that cannot fails.
func needRoot(t *testing.T) {
	if os.Getuid() == 0 {
		return
	}
	if testenv.CI() {
		t.Fatal("needs root (CI=true)")
	}
	t.Skip("needs root to act as another user")
}

// runAs connects to the socket at path as user uid (this test binary
// again, dialAs) and returns what it read.
func runAs(t *testing.T, uid int, path string) (string, error) {
	// A copy of the test binary that the user may run.
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		return "", err
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	cp := filepath.Join(dir, "dial")
	if err := os.WriteFile(cp, b, 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command(cp)
	cmd.Env = append(os.Environ(), dialEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// dialAs is the child of runAs: it connects and prints the first line
// the agent sends, or nothing when it hangs up.
func dialAs(path string) int {
	conn, err := net.Dial("unix", path)
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 4096)
	n, _ := conn.Read(b)
	fmt.Print(string(b[:n]))
	return 0
}

// A program that does not link pgx (pg-loop) reaches the store through the
// host's agent, or through a private one on pipes when the host's agent
// cannot be used (here: a run directory open to others) or store_agent is
// off; a private one ends with its client.
func TestOpenRemote(t *testing.T) {
	home := withHome(t, time.Minute)
	url := "file:" + t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := agent.RemoteOptions{Home: home, URL: url, Env: append(os.Environ(), agentEnv+"=1"), Path: exe, Name: "pg-queue", Stderr: os.Stderr}
	use := func(t *testing.T, o agent.RemoteOptions) int {
		st, err := agent.OpenRemote(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		tm, err := st.Team("t")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tm.Tasks().Add([]protocol.Task{{Title: "x"}}); err != nil {
			t.Fatal(err)
		}
		return st.(*remote.Client).Hello().PID
	}
	host := use(t, o)
	sock := socketPath(home, url)
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("no host agent: %v", err)
	}
	if !alive(host) {
		t.Fatal("the host's agent is gone")
	}
	o.Off = true
	private := use(t, o)
	if private == host || alive(private) {
		t.Fatalf("store_agent=off: agent %d (host's %d), alive %v", private, host, alive(private))
	}
	o.Off = false
	os.Chmod(filepath.Dir(sock), 0o755)
	private = use(t, o)
	if private == host || alive(private) {
		t.Fatalf("refused host agent: agent %d (host's %d), alive %v", private, host, alive(private))
	}
}

// refusedURL is a PostgreSQL URL of a local port nothing listens on,
// held until the test ends.
func refusedURL(t *testing.T) string {
	t.Helper()
	addr, release, err := testnet.Refused()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return "postgres://postgres@" + addr + "/x?sslmode=disable&connect_timeout=5"
}

// An agent that cannot open its store says so on the readiness pipe and
// exits; the command connects directly, and so do the commands behind it
// for a while, without each starting (and waiting for) another agent.
func TestStartFails(t *testing.T) {
	home := withHome(t, time.Minute)
	url := refusedURL(t)
	for i := range 3 {
		_, err := agent.Open(context.Background(), options(url))
		if err == nil {
			t.Fatalf("open %d: an agent without a database", i)
		}
		if i > 0 && !strings.Contains(err.Error(), "could not start") {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	log, err := os.ReadFile(strings.TrimSuffix(socketPath(home, url), ".sock") + ".log")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "store agent "); n != 1 {
		t.Fatalf("%d agents tried to start, want 1; log:\n%s", n, log)
	}
}

// TestFutureFailedMarkIgnored: a .failed mark dated in the future (a clock
// set back, a touch -d) does not keep the host's agent off for that long:
// the next command starts one.
func TestFutureFailedMarkIgnored(t *testing.T) {
	home := withHome(t, time.Minute)
	url := "file:" + t.TempDir()
	base := strings.TrimSuffix(socketPath(home, url), ".sock")
	if err := os.MkdirAll(filepath.Dir(base), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".failed", []byte("an old failure\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(365 * 24 * time.Hour)
	if err := os.Chtimes(base+".failed", future, future); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, options(url))
	if c.Hello().PID <= 0 {
		t.Fatalf("no agent started: hello %+v", c.Hello())
	}
}
