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
	sent, err := SignalGroup(cmd.Process.Pid, "1", syscall.SIGTERM)
	if sent || err != nil {
		t.Fatalf("signalled a pid whose start time does not match: %v %v", sent, err)
	}
	sent, err = SignalGroup(cmd.Process.Pid, start, syscall.SIGTERM)
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
