package pgmonitor_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgmonitor"
	"github.com/powerglide/powerglide/pkg/internal/testenv"
)

// Issue 20: beat records what the watch later signals and counts, so
// nonsense in it is bad input: exit 2, a one-line error, and nothing
// written (no team directory, no record).
func TestBeatRejectsNonsense(t *testing.T) {
	// The worker leads its own session, so its record has a sid to name
	// even where the test runs in a session started outside its pid
	// namespace (sid 0 in /proc, as in CI's container).
	worker := exec.Command("sleep", "60")
	worker.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { worker.Process.Kill(); worker.Wait() }()
	pid := strconv.Itoa(worker.Process.Pid)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pid", "1"}, "pid 1 cannot be a worker"},
		{[]string{"--pid=-5"}, "pid -5 cannot be a worker"},
		{[]string{"--pid", "999999999"}, "no such process"},
		{[]string{"--pid", pid, "--cost-usd", "NaN"}, "--cost-usd: expected a finite number"},
		{[]string{"--pid", pid, "--cost-usd", "+Inf"}, "--cost-usd: expected a finite number"},
		{[]string{"--pid", pid, "--cost-usd=-100"}, "--cost-usd must be a finite number of 0 or more"},
		{[]string{"--pid", pid, "--step=-1"}, "--step must be 0 or more"},
		{[]string{"--pid", pid, "--state", ""}, "--state must not be empty"},
		{[]string{"--pid", pid, "--task", "a\x1b]0;x\x07"}, "--task must be printable text"},
	} {
		home := t.TempDir()
		var out, errb bytes.Buffer
		args := append([]string{"beat", "--team", "t", "--worker", "1"}, c.args...)
		code := cli.Run(context.Background(), pgmonitor.Spec(), args, cli.Test(nil, &out, &errb, "POWERGLIDE_HOME="+home, "HOME="+home))
		msg := errb.String()
		if code != 2 || !strings.Contains(msg, c.want) || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "pg-monitor: error: ") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line saying %q", c.args, code, msg, c.want)
		}
		if ents, _ := os.ReadDir(home); len(ents) != 0 {
			t.Errorf("%v: left %v in POWERGLIDE_HOME", c.args, ents)
		}
	}
	// A sane beat for the same process goes through.
	home := t.TempDir()
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), pgmonitor.Spec(), []string{"beat", "--team", "t", "--worker", "1", "--pid", pid, "--cost-usd", "0.5", "--step", "3"},
		cli.Test(nil, &out, &errb, "POWERGLIDE_HOME="+home, "HOME="+home))
	if code != 0 {
		t.Fatalf("sane beat: exit %d: %s", code, errb.String())
	}
	// The record names the process by its start time, group and session.
	b, err := os.ReadFile(home + "/teams/t/worker-1.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"pid": ` + pid, `"pgid": `, `"sid": `, `"pid_start": "`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("worker-1.json lacks %s:\n%s", want, b)
		}
	}
}

// hostile3 F1: beat marks the pid it names as the team's worker, which a
// watcher of this data root then signals; a pid of another user is bad
// input (exit 2, one line), and nothing is written, mark included.
func TestBeatRefusesAnotherUsersPid(t *testing.T) {
	other := testenv.OtherUsersProcess(t)
	home := t.TempDir()
	var out, errb bytes.Buffer
	pid := strconv.Itoa(other.Process.Pid)
	code := cli.Run(context.Background(), pgmonitor.Spec(), []string{"beat", "--team", "t", "--worker", "1", "--pid", pid},
		cli.Test(nil, &out, &errb, "POWERGLIDE_HOME="+home, "HOME="+home))
	want := "pg-monitor: error: invalid heartbeat: --pid " + pid + " runs as uid 65534, not as this user (uid 0): a worker must be a process of the user who beats for it\n"
	if code != 2 || errb.String() != want {
		t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, errb.String(), want)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Fatalf("left %v in POWERGLIDE_HOME", ents)
	}
}
