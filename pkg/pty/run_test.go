package pty

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/proc"
)

func runOpts(cmd ...string) RunOptions {
	return RunOptions{Command: cmd, Env: append(os.Environ(), "TERM=xterm"), Cols: 80, Rows: 24, Capture: 1 << 16}
}

// within fails the test when f has not returned after a generous bound:
// the tests check that things end, never how fast.
func within[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not end", what)
	}
	panic("unreachable")
}

func mustRun(t *testing.T, o RunOptions) *RunResult {
	t.Helper()
	type r struct {
		res *RunResult
		err error
	}
	got := within(t, strings.Join(o.Command, " "), func() r { res, err := Run(context.Background(), o); return r{res, err} })
	if got.err != nil {
		t.Fatalf("run %v: %v", o.Command, got.err)
	}
	return got.res
}

func TestRunExitCodes(t *testing.T) {
	cases := []struct {
		cmd    []string
		code   int
		signal string
		output string
	}{
		{[]string{"sh", "-c", "echo hello; exit 42"}, 42, "", "hello\r\n"},
		{[]string{"sh", "-c", "echo bye; kill -KILL $$"}, 137, "SIGKILL", "bye\r\n"},
		{[]string{"sh", "-c", "kill -TERM $$"}, 143, "SIGTERM", ""},
		{[]string{"true"}, 0, "", ""},
		// The terminal is a terminal.
		{[]string{"sh", "-c", "test -t 0 && test -t 1 && stty size"}, 0, "", "24 80\r\n"},
	}
	for _, c := range cases {
		res := mustRun(t, runOpts(c.cmd...))
		if res.ExitCode != c.code || res.Signal != c.signal || res.Output != c.output {
			t.Errorf("%v: exit %d signal %q output %q; want %d %q %q", c.cmd, res.ExitCode, res.Signal, res.Output, c.code, c.signal, c.output)
		}
	}
}

func TestRunNotFound(t *testing.T) {
	_, err := Run(context.Background(), runOpts("no-such-command-pgpty"))
	if err == nil || !strings.Contains(err.Error(), "command not found: no-such-command-pgpty") {
		t.Fatalf("err = %v", err)
	}
}

// A grandchild that keeps the terminal open must not keep the run alive.
func TestRunGrandchildHoldsTerminal(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	res := mustRun(t, runOpts("sh", "-c", grandchild(pidFile)+"; echo parent done; exit 7"))
	// The grandchild outlived the run, holding the terminal.
	if err := killGrandchild(pidFile); err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || !strings.Contains(res.Output, "parent done") {
		t.Fatalf("exit %d output %q", res.ExitCode, res.Output)
	}
}

// A timeout kills the whole process group, grandchildren included.
func TestRunTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	o := runOpts("sh", "-c", "trap '' TERM; sleep 300 & echo $! > "+pidFile+"; echo started; wait")
	o.Timeout = 300 * time.Millisecond
	o.KillGrace = 200 * time.Millisecond
	res := mustRun(t, o)
	if res.ExitCode != 124 || !res.TimedOut || res.Signal != "SIGKILL" {
		t.Fatalf("exit %d timed out %v signal %q", res.ExitCode, res.TimedOut, res.Signal)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	waitFor(t, "grandchild killed", func() bool {
		st, err := proc.State(pid)
		return err != nil || st == "Z"
	})
}

func TestRunInput(t *testing.T) {
	o := runOpts("cat")
	o.Input = strings.NewReader("one\ntwo\n")
	res := mustRun(t, o)
	// The terminal echoes what is typed, then cat prints it: one, one, two, two.
	if res.ExitCode != 0 || strings.Count(res.Output, "one\r\n") != 2 || strings.Count(res.Output, "two\r\n") != 2 {
		t.Fatalf("exit %d output %q", res.ExitCode, res.Output)
	}
	// An unterminated last line still ends with end-of-file.
	o = runOpts("cat")
	o.Input = strings.NewReader("tail")
	res = mustRun(t, o)
	if res.ExitCode != 0 || strings.Count(res.Output, "tail") != 2 {
		t.Fatalf("exit %d output %q", res.ExitCode, res.Output)
	}
}

// python3's REPL switches the terminal to raw mode after the input was
// typed; end-of-file must still reach it.
func TestRunPythonInput(t *testing.T) {
	o := runOpts("python3", "-q")
	o.Input = strings.NewReader("print(6*7)\n")
	res := mustRun(t, o)
	if res.ExitCode != 0 || !strings.Contains(res.Output, "42\r\n") {
		t.Fatalf("exit %d output %q", res.ExitCode, res.Output)
	}
}

// Output arrives while the command still runs.
func TestRunStreams(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	pr, pw := io.Pipe()
	o := runOpts("sh", "-c", "echo first; while [ ! -e "+gate+" ]; do sleep 0.05; done; echo second")
	o.Output = pw
	done := make(chan *RunResult, 1)
	go func() {
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Error(err)
		}
		pw.Close()
		done <- res
	}()
	br := bufio.NewReader(pr)
	line, err := br.ReadString('\n')
	if err != nil || line != "first\r\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(br)
	res := within(t, "run", func() *RunResult { return <-done })
	if string(rest) != "second\r\n" || res.ExitCode != 0 {
		t.Fatalf("rest %q exit %d", rest, res.ExitCode)
	}
}

func TestRunStopForwardsSignal(t *testing.T) {
	o := runOpts("sleep", "300")
	stop := make(chan syscall.Signal, 1)
	o.Stop = stop
	stop <- syscall.SIGINT
	res := mustRun(t, o)
	if res.ExitCode != 130 || res.Signal != "SIGINT" {
		t.Fatalf("exit %d signal %q", res.ExitCode, res.Signal)
	}
}

func TestCapture(t *testing.T) {
	c := newCapture(10)
	c.write([]byte("hello"))
	if s, tr := c.String(); s != "hello" || tr {
		t.Fatalf("%q %v", s, tr)
	}
	c.write([]byte(" wonderful world"))
	s, tr := c.String()
	if !tr || !strings.HasPrefix(s, "hello") || !strings.HasSuffix(s, "world") || !strings.Contains(s, "[... 11 bytes omitted ...]") {
		t.Fatalf("%q %v", s, tr)
	}
	// Many small writes keep the tail.
	c = newCapture(8)
	for i := 0; i < 10000; i++ {
		c.write([]byte{byte('a' + i%26)})
	}
	s, tr = c.String()
	if !tr || !strings.HasPrefix(s, "abcd") || !strings.HasSuffix(s, string([]byte{'a' + 9996%26, 'a' + 9997%26, 'a' + 9998%26, 'a' + 9999%26})) {
		t.Fatalf("%q", s)
	}
	// Never half a rune.
	c = newCapture(4)
	c.write([]byte("ééééé"))
	s, _ = c.String()
	if strings.ContainsRune(s, '\uFFFD') || !strings.HasPrefix(s, "é") {
		t.Fatalf("%q", s)
	}
}

// grandchild is shell code starting a grandchild in its own session that
// keeps the terminal open; the pid file appears once it is there.
func grandchild(pidFile string) string {
	return `setsid sh -c 'echo $$ > ` + pidFile + `.tmp; mv ` + pidFile + `.tmp ` + pidFile + `; exec sleep 300' & while [ ! -e ` + pidFile + ` ]; do sleep 0.01; done`
}

func killGrandchild(pidFile string) error {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return err
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
