package proc_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/proc/proctest"
)

// startGroup starts `sh -c 'sleep 60 & wait'` as the leader of a new
// process group and returns it with its start time and the sleep's pid.
func startGroup(t *testing.T) (*exec.Cmd, string, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 60 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	sleep := readPID(out)
	start, err := proc.StartTime(cmd.Process.Pid)
	if err != nil || sleep == 0 {
		t.Fatalf("start time %v, sleep pid %d", err, sleep)
	}
	return cmd, start, sleep
}

// readPID reads the pid a shell printed with `echo $!` (0 if none).
func readPID(r io.Reader) int {
	var b [32]byte
	n, _ := r.Read(b[:])
	pid := 0
	for _, c := range b[:n] {
		if c >= '0' && c <= '9' {
			pid = pid*10 + int(c-'0')
		}
	}
	return pid
}

// Nothing is ever sent to pid 1 and below, this process, its ancestors,
// their process groups, or a pid whose start time differs from the
// record. Every check happens before the Sender, which records.
func TestSignalerRefuses(t *testing.T) {
	rec := &proctest.Recorder{}
	sig := &proc.Signaler{Sender: rec}
	self, _ := proc.ReadStat(os.Getpid())
	parent, _ := proc.ReadStat(os.Getppid())
	for _, tg := range []proc.Target{
		{PID: -1, Start: "1"}, {PID: 0, Start: "1"}, {PID: 1, Start: startOf(1)},
		{PID: os.Getpid(), Start: self.Start}, {PID: os.Getppid(), Start: parent.Start},
		{PID: self.PGID, Start: startOf(self.PGID)},
	} {
		for name, f := range map[string]func(proc.Target, syscall.Signal) (bool, error){"Signal": sig.Signal, "SignalGroup": sig.SignalGroup} {
			ok, err := f(tg, syscall.SIGTERM)
			if ok || !errors.Is(err, proc.ErrRefused) {
				t.Errorf("%s(%+v) = %v, %v; want refused", name, tg, ok, err)
			}
		}
	}
	for _, pgid := range []int{-1, 0, 1, self.PGID, parent.PGID} {
		ok, err := sig.SignalLeftovers(pgid, []proc.Member{{PID: os.Getpid(), Start: self.Start}}, syscall.SIGKILL)
		if ok || !errors.Is(err, proc.ErrRefused) {
			t.Errorf("SignalLeftovers(%d) = %v, %v; want refused", pgid, ok, err)
		}
	}
	// A kernel thread (kthreadd is pid 2 outside a PID namespace).
	if k, err := proc.ReadStat(2); err == nil && k.Kernel() {
		if ok, err := sig.SignalGroup(proc.Target{PID: 2, Start: k.Start}, syscall.SIGTERM); ok || !errors.Is(err, proc.ErrRefused) {
			t.Errorf("SignalGroup(kthreadd) = %v, %v; want refused", ok, err)
		}
	}
	// A stranger: our child, but the record's start time differs.
	cmd, start, _ := startGroup(t)
	if ok, err := sig.SignalGroup(proc.Target{PID: cmd.Process.Pid, Start: start + "0"}, syscall.SIGTERM); ok || err != nil {
		t.Errorf("signalled a pid whose start time differs: %v %v", ok, err)
	}
	if ok, err := sig.SignalGroup(proc.Target{PID: cmd.Process.Pid, Start: start, PPID: 1}, syscall.SIGTERM); ok || err != nil {
		t.Errorf("signalled a pid whose parent differs from the record: %v %v", ok, err)
	}
	if s := rec.Sent(); len(s) != 0 {
		t.Fatalf("sent %+v", s)
	}
	// The real one is signalled as a group.
	if ok, err := sig.SignalGroup(proc.Target{PID: cmd.Process.Pid, Start: start, PPID: os.Getpid()}, syscall.SIGTERM); !ok || err != nil {
		t.Errorf("SignalGroup of our child: %v %v", ok, err)
	}
	if s := rec.Sent(); len(s) != 1 || s[0] != (proctest.Sent{Group: cmd.Process.Pid, Sig: syscall.SIGTERM}) {
		t.Fatalf("sent %+v, want SIGTERM to group %d", s, cmd.Process.Pid)
	}
}

func startOf(pid int) string {
	s, _ := proc.StartTime(pid)
	return s
}

// In a PID namespace of its own, with the real kernel: records naming
// pid 1, -1, 0 and this process signal nothing (a kill of -1 would end
// the bystander), and the group of our child, grandchild included, is
// signalled while its leader lives.
func TestSignalInNamespace(t *testing.T) {
	if !proctest.InNamespace(t) {
		return
	}
	bystander := proctest.StartBystander(t)
	for _, pid := range []int{-1, 0, 1} {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			proc.Default.SignalGroup(proc.Target{PID: pid, Start: startOf(1)}, sig)
			proc.Default.Signal(proc.Target{PID: pid, Start: startOf(1)}, sig)
			proc.Default.SignalLeftovers(pid, []proc.Member{{PID: bystander.PID(), Start: bystander.Start()}}, sig)
		}
	}
	cmd, start, sleep := startGroup(t)
	sstart := startOf(sleep)
	if ok, err := proc.Default.SignalGroup(proc.Target{PID: cmd.Process.Pid, Start: start}, syscall.SIGKILL); !ok || err != nil {
		t.Fatalf("SignalGroup: %v %v", ok, err)
	}
	cmd.Wait()
	waitGone(t, sleep, sstart)
	bystander.Check(t)
}

func waitGone(t *testing.T, pid int, start string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); proc.Matches(pid, start); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still running", pid)
		}
	}
}

// A Child's group is signalled until the leader is reaped, never after:
// after the reap its id may name another group.
func TestChildGroupOnlyUntilReaped(t *testing.T) {
	c := proc.Command(exec.Command("sh", "-c", "sleep 60 & echo $!"))
	c.EndGroup = true
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	sleep := readPID(out)
	sstart := startOf(sleep)
	// The shell has exited (unreaped); its background sleep lives on in
	// the group until Wait ends it.
	c.Exited()
	if !proc.Matches(sleep, sstart) {
		t.Fatal("the background sleep ended before Wait")
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, sleep, sstart)
	if ok, err := c.SignalGroup(syscall.SIGKILL); ok || err != nil {
		t.Fatalf("signalled the group of a reaped child: %v %v", ok, err)
	}
}

// Cancelling the context of a Child made with CommandContext kills its
// group (the grandchild too), and a cancel after the reap sends nothing.
func TestChildCancelKillsGroup(t *testing.T) {
	ctx, cancel := contextWithCancel(t)
	c := proc.Command(exec.CommandContext(ctx, "sh", "-c", "sleep 60 & echo $!; wait"))
	out, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	sleep := readPID(out)
	sstart := startOf(sleep)
	cancel()
	c.Wait()
	waitGone(t, sleep, sstart)
}

// Guards answers as Guard does, for every kind of pid, from one reading
// of the ancestry.
func TestGuardsAgreeWithGuard(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var g proc.Guards
	for _, pid := range []int{-1, 0, 1, os.Getpid(), os.Getppid(), cmd.Process.Pid} {
		want, got := proc.Guard(pid), g.Guard(pid)
		if (want == nil) != (got == nil) || (want != nil && want.Error() != got.Error()) {
			t.Errorf("pid %d: Guards says %v, Guard %v", pid, got, want)
		}
	}
	if err := g.Guard(cmd.Process.Pid); err != nil {
		t.Errorf("a child of ours refused: %v", err)
	}
	if err := g.Guard(os.Getppid()); !errors.Is(err, proc.ErrRefused) {
		t.Errorf("the parent allowed: %v", err)
	}
}
