package proctest

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/powerglide/powerglide/pkg/proc"
)

// marker is the signal a Bystander's check ends it with. Like SIGTERM and
// SIGKILL it ends `sleep`, and the kernel keeps the first such signal a
// process receives as its cause of death and drops the later ones: a
// Bystander that a test's stray signal reached dies of that one, however
// long ago or however recently it was sent.
const marker = syscall.SIGUSR2

// Bystander is a process no signal of the test may reach: in a PID
// namespace of the test's own, a kill of pid -1, of a group it did not
// start or of a reused pid would reach it.
type Bystander struct {
	cmd *exec.Cmd
}

// StartBystander starts `sleep 60` as a bystander.
func StartBystander(t testing.TB) *Bystander {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a bystander: %v", err)
	}
	b := &Bystander{cmd: cmd}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return b
}

// PID is the bystander's pid.
func (b *Bystander) PID() int { return b.cmd.Process.Pid }

// Start is the bystander's start time (its identity with its pid).
func (b *Bystander) Start() string {
	s, _ := proc.StartTime(b.PID())
	return s
}

// Check ends the bystander with a signal of its own and fails the test
// when it died of another one before: what the test sent reached it. It
// needs no wait for a signal in flight: the first fatal signal sent to a
// process is the one it dies of.
func (b *Bystander) Check(t testing.TB) {
	t.Helper()
	b.cmd.Process.Signal(marker)
	b.cmd.Wait()
	ws, ok := b.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != marker {
		t.Fatalf("a signal reached the bystander (pid %d): it ended with %v", b.PID(), b.cmd.ProcessState)
	}
}

// Child starts `sleep 60` in a process group of its own, as a worker is:
// the one process a test's signals may reach. It is ended when the test
// ends. It returns its pid and start time.
func Child(t testing.TB) (int, string) {
	t.Helper()
	c := exec.Command("sleep", "60")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatalf("start a child: %v", err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	start, _ := proc.StartTime(c.Process.Pid)
	return c.Process.Pid, start
}

// Relatives are the processes a hostile record may name besides pid 1, 0
// and -1: the test process, its parent, its process group and its
// session.
type Relatives struct {
	Self, Parent, Group, Session int
}

// ReadRelatives reads this process's relatives.
func ReadRelatives() Relatives {
	self, _ := proc.ReadStat(os.Getpid())
	return Relatives{Self: os.Getpid(), Parent: os.Getppid(), Group: self.PGID, Session: self.SID}
}

// Seed maps the fuzz seeds -2, -3, -4 and -5 to the test process, its
// parent, its group and its session; any other pid is itself.
func (r Relatives) Seed(pid int) int {
	switch pid {
	case -2:
		return r.Self
	case -3:
		return r.Parent
	case -4:
		return r.Group
	case -5:
		return r.Session
	}
	return pid
}

// Hostile reports whether no signal may ever go to pid: 1, 0, -1 or one of
// the relatives.
func (r Relatives) Hostile(pid int) bool {
	switch pid {
	case 1, 0, -1, r.Self, r.Parent, r.Group, r.Session:
		return true
	}
	return false
}

// RecordStart is the start time a fuzzed worker record gives pid. For a
// pid the test knows (a hostile one, its own child) an empty start
// becomes the real one, so that only the guards stand in the way. For any
// other live process a true start time is changed: a record naming a
// process with its true start time is what a worker record is (the start
// time is the identity, DESIGN.md §4), so such records are the fuzzer's
// to vary, not to guess.
func RecordStart(pid int, start string, known bool) string {
	real, _ := proc.StartTime(pid)
	switch {
	case known:
		if start == "" {
			return real
		}
	case start == real:
		return start + "0"
	}
	return start
}

// Stray returns the signals in sent that went to neither one of the
// allowed pids nor their groups.
func Stray(sent []Sent, allowed ...int) []Sent {
	var out []Sent
	for _, s := range sent {
		ok := false
		for _, a := range allowed {
			if s.Pid == a || s.Group == a {
				ok = true
			}
		}
		if !ok {
			out = append(out, s)
		}
	}
	return out
}
