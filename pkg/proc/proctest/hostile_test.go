package proctest

import (
	"fmt"
	"os"
	"syscall"
	"testing"
)

// fatalTB records a Fatalf instead of ending the test.
type fatalTB struct {
	testing.TB
	failed string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

// A signal that reached the bystander is seen at once, with no wait for
// it to be delivered: right after the kill(2), and also when it came
// first of several. An untouched bystander passes.
func TestBystanderCheck(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		b := StartBystander(t)
		if err := syscall.Kill(b.PID(), sig); err != nil {
			t.Fatal(err)
		}
		syscall.Kill(b.PID(), syscall.SIGHUP)
		f := &fatalTB{TB: t}
		b.Check(f)
		if f.failed == "" {
			t.Errorf("%v to the bystander went unseen", sig)
		}
	}
	b := StartBystander(t)
	f := &fatalTB{TB: t}
	b.Check(f)
	if f.failed != "" {
		t.Errorf("an untouched bystander: %s", f.failed)
	}
}

func TestRelativesAndStray(t *testing.T) {
	rel := ReadRelatives()
	for _, seed := range []int{-2, -3, -4, -5, 0, 1, -1} {
		if !rel.Hostile(rel.Seed(seed)) {
			t.Errorf("seed %d (pid %d) is not hostile", seed, rel.Seed(seed))
		}
	}
	if rel.Seed(-2) != os.Getpid() || rel.Seed(-3) != os.Getppid() || rel.Seed(7) != 7 {
		t.Errorf("seeds: %+v", rel)
	}
	c, start := Child(t)
	if rel.Hostile(c) {
		t.Error("the test's own child is hostile")
	}
	if got := RecordStart(c, "", true); got != start {
		t.Errorf("a known pid without a start gets %q, want the real %q", got, start)
	}
	if got := RecordStart(c, start, false); got == start {
		t.Error("an unknown live process kept its true start time")
	}
	sent := []Sent{{Pid: c, Sig: syscall.SIGTERM}, {Group: c, Sig: syscall.SIGKILL}, {Pid: 1, Sig: syscall.SIGTERM}, {Group: -1, Sig: syscall.SIGKILL}}
	if stray := Stray(sent, c); len(stray) != 2 || stray[0].Pid != 1 || stray[1].Group != -1 {
		t.Errorf("stray: %+v", stray)
	}
}
