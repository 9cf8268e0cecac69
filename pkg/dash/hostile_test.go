package dash

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/proc/proctest"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/workermark"
)

// FuzzDashKill presses the kill key (x, then y) on random worker records
// (pids including 0, 1, -1, this process, its parent and group, random
// start times) with a Sender that records: a signal may only go to the
// test's own child.
func FuzzDashKill(f *testing.F) {
	for _, pid := range []int{1, 0, -1, -2, -3, -4, -5, 1 << 22} {
		f.Add(pid, "", false)
		f.Add(pid, "1", true)
	}
	f.Add(-6, "", true) // the test's own child
	host, _ := os.Hostname()
	rec := &proctest.Recorder{}
	rel := proctest.ReadRelatives()
	f.Fuzz(func(t *testing.T, pid int, start string, child bool) {
		d := teamdir.Dir{Home: t.TempDir(), Team: "t"}
		if err := d.Ensure(); err != nil {
			t.Fatal(err)
		}
		var allowed []int
		if child {
			c, _ := proctest.Child(t)
			allowed = append(allowed, c)
			if pid == -6 {
				pid = c
			}
			// The child is the team's worker, as pg-loop or beat marks it.
			if err := workermark.Make(d.Home, c, startOf(c), workermark.Mark{Team: "t", Worker: "1"}); err != nil {
				t.Fatal(err)
			}
		}
		pid = rel.Seed(pid)
		start = proctest.RecordStart(pid, start, rel.Hostile(pid) || slices.Contains(allowed, pid))
		m := New(Options{Dir: d, Host: proc.Host{Name: host}, Signals: &proc.Signaler{Sender: rec}})
		m.snap = Snapshot{Workers: []WorkerInfo{{Worker: protocol.Worker{Worker: "1", PID: pid, PIDStart: start, Host: host,
			State: "executing", HeartbeatAt: time.Now().Add(-time.Hour)}}}}
		m.sel = 0
		m.key(keyMsg("x"))
		if cmd := m.key(keyMsg("y")); cmd != nil {
			cmd()
		}
		sent := rec.Sent()
		if slices.Contains(allowed, pid) && start == startOf(pid) && len(sent) != 1 {
			t.Fatalf("the kill key on the test's own child sent %+v, want one SIGTERM", sent)
		}
		if stray := proctest.Stray(sent, allowed...); len(stray) > 0 {
			t.Fatalf("record pid %d start %q: signals %+v, not to a process of this test", pid, start, stray)
		}
	})
}

// Issue 20: a heartbeat dated 2099 made a worker look alive forever; the
// snapshot shows it stale.
func TestFutureHeartbeatIsStale(t *testing.T) {
	now := time.Now()
	s := &Snapshot{Workers: []WorkerInfo{
		{Worker: protocol.Worker{Worker: "1", State: "executing", HeartbeatAt: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{Worker: protocol.Worker{Worker: "2", State: "executing", HeartbeatAt: now.Add(20 * time.Second)}},
	}}
	rec := Record(s, now, 30*time.Second, nil)
	if !rec.Workers[0].Stale {
		t.Error("a heartbeat in 2099 is not stale")
	}
	if rec.Workers[1].Stale {
		t.Error("a heartbeat 20s ahead (clock skew) is stale")
	}
}

func startOf(pid int) string {
	s, _ := proc.StartTime(pid)
	return s
}

// A record whose pid_start is not a start time as /proc writes it (here
// the test's own child's with a leading zero) is not offered for a stop:
// its process cannot be checked (hostile review F6).
func TestStopKeyMalformedStart(t *testing.T) {
	d := teamdir.Dir{Home: t.TempDir(), Team: "t"}
	if err := d.Ensure(); err != nil {
		t.Fatal(err)
	}
	c, _ := proctest.Child(t)
	host, _ := os.Hostname()
	rec := &proctest.Recorder{}
	m := New(Options{Dir: d, Host: proc.Host{Name: host}, Signals: &proc.Signaler{Sender: rec}})
	m.snap = Snapshot{Workers: []WorkerInfo{{Worker: protocol.Worker{Worker: "1", PID: c, PIDStart: "0" + startOf(c), Host: host,
		State: "executing", HeartbeatAt: time.Now().Add(-time.Hour)}}}}
	m.sel = 0
	m.key(keyMsg("x"))
	if m.confirm != nil || m.status != `worker 1: its pid_start "0`+startOf(c)+`" is not a start time: nothing to stop` {
		t.Fatalf("stop key on a malformed pid_start: confirm %+v, status %q", m.confirm, m.status)
	}
	if cmd := m.key(keyMsg("y")); cmd != nil {
		cmd()
	}
	if sent := rec.Sent(); len(sent) != 0 {
		t.Fatalf("signals sent: %+v", sent)
	}
}

// On a store several hosts share, a record without host_id is no host's:
// the stop key refuses it even when it names this host (hostile review F6).
func TestStopKeyNoHostIDOnSharedStore(t *testing.T) {
	d := teamdir.Dir{Home: t.TempDir(), Team: "t"}
	if err := d.Ensure(); err != nil {
		t.Fatal(err)
	}
	c, _ := proctest.Child(t)
	this := proc.ThisHost()
	this.Shared = true
	rec := &proctest.Recorder{}
	m := New(Options{Dir: d, Host: this, Signals: &proc.Signaler{Sender: rec}})
	m.snap = Snapshot{Workers: []WorkerInfo{{Worker: protocol.Worker{Worker: "1", PID: c, PIDStart: startOf(c), Host: this.Name,
		State: "executing", HeartbeatAt: time.Now().Add(-time.Hour)}}}}
	m.sel = 0
	m.key(keyMsg("x"))
	if m.confirm != nil || m.status != "worker 1's record has no host_id: on a shared store its pid is no host's to stop" {
		t.Fatalf("stop key: confirm %+v, status %q", m.confirm, m.status)
	}
	if cmd := m.key(keyMsg("y")); cmd != nil {
		cmd()
	}
	if sent := rec.Sent(); len(sent) != 0 {
		t.Fatalf("signals sent: %+v", sent)
	}
}
