package proc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestStartTimeIdentifiesProcess(t *testing.T) {
	pid, start, err := Self()
	if err != nil || start == "" {
		t.Fatalf("Self: %v %q", err, start)
	}
	if !Matches(pid, start) {
		t.Fatal("self does not match its own start time")
	}
	if Matches(pid, start+"1") {
		t.Fatal("a different start time matched")
	}
}

func TestSignalGroupOnlyWhenStartMatches(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	start, err := StartTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := Default.SignalGroup(Target{PID: cmd.Process.Pid, Start: "1"}, syscall.SIGTERM)
	if sent || err != nil {
		t.Fatalf("signalled a pid whose start time does not match: %v %v", sent, err)
	}
	sent, err = Default.SignalGroup(Target{PID: cmd.Process.Pid, Start: start}, syscall.SIGTERM)
	if !sent || err != nil {
		t.Fatalf("SignalGroup: %v %v", sent, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("process survived SIGTERM")
	}
	if Matches(cmd.Process.Pid, start) {
		t.Fatal("a reaped process still matches")
	}
	if _, err := StartTime(cmd.Process.Pid); err != ErrGone {
		t.Fatalf("StartTime of a gone process: %v", err)
	}
}

// The rest of a group whose leader ended is signalled only while a member
// recorded earlier is alive in it; an unknown group (the id reused after
// the recorded group ended) never is.
func TestSignalLeftovers(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	defer func() { syscall.Kill(-pgid, syscall.SIGKILL); cmd.Wait() }()
	var ms []Member
	for deadline := time.Now().Add(5 * time.Second); len(ms) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ms, _ = GroupMembers(pgid)
	}
	if len(ms) != 2 {
		t.Fatalf("group members: %v, want the shell and sleep", ms)
	}
	stranger := []Member{{PID: ms[0].PID, Start: ms[0].Start + "1"}}
	if sent, err := Default.SignalLeftovers(pgid, stranger, syscall.SIGTERM); sent || err != nil {
		t.Fatalf("signalled a group none of whose members is known: %v %v", sent, err)
	}
	if got := Leftovers(pgid, ms); len(got) != 2 {
		t.Fatalf("leftovers %v, want both", got)
	}
	if sent, err := Default.SignalLeftovers(pgid, ms, syscall.SIGKILL); !sent || err != nil {
		t.Fatalf("SignalLeftovers: %v %v", sent, err)
	}
	cmd.Wait()
	for deadline := time.Now().Add(5 * time.Second); len(Leftovers(pgid, ms)) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the group survived SIGKILL")
		}
	}
}

// TestPollExit: the wait on a pidfd returns once the child has exited,
// without reaping it (its group may still be signalled), and leaves the
// reap to Wait, which sees the exit status.
func TestPollExit(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 0.2; exit 3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if !pollExit(cmd.Process.Pid) {
		t.Fatal("pollExit: no pidfd on this kernel (Linux 5.3 and later have them)")
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("pollExit returned after %s, before the child exited", d)
	}
	if st, err := State(cmd.Process.Pid); err != nil || st != "Z" {
		t.Errorf("the child after pollExit: state %q, %v; want a zombie, not yet reaped", st, err)
	}
	if err := cmd.Wait(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("Wait after pollExit: %v, want exit code 3", err)
	}
}
