package dash

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// withApproval makes worker 1 of the fixture wait on a call (pg-loop
// --ask), as its record says.
func withApproval(t *testing.T, d teamdir.Dir) {
	t.Helper()
	w, err := d.ReadWorker("1")
	if err != nil {
		t.Fatal(err)
	}
	w.Approval = &protocol.PendingApproval{Call: "call_7_1", Tool: "bash", Input: `{"command":"git push origin main"}`, Pattern: "bash:git push*", Task: w.Task, Since: fixtureNow.Add(-20 * time.Second)}
	if err := d.WriteWorker(w); err != nil {
		t.Fatal(err)
	}
}

// TestApprovalFrames: a worker waiting on a call shows "approval?" in the
// workers table, and the bottom line asks about its call, with the y and n
// keys in the help bar.
func TestApprovalFrames(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		name := fmt.Sprintf("approval-%dx%d", size[0], size[1])
		t.Run(name, func(t *testing.T) {
			d := fixtureDir(t)
			withApproval(t, d)
			h := startHarness(t, Options{Dir: d}, size[0], size[1])
			f := h.waitFor("retry-after", "approval?", "worker 1 asks to run bash")
			goldenFrame(t, name, f)
			if n := strings.Count(f, "\n") + 1; n != size[1] {
				t.Errorf("frame has %d lines, want %d", n, size[1])
			}
		})
	}
}

// TestApprovalKeys: y approves the selected worker's call and n denies it,
// through worker-<n>.approval, as pg-loop approve does.
func TestApprovalKeys(t *testing.T) {
	for _, c := range []struct {
		key      string
		approved bool
		status   string
	}{
		{"y", true, "worker 1: approved call call_7_1 (bash)"},
		{"n", false, "worker 1: denied call call_7_1 (bash)"},
	} {
		t.Run(c.key, func(t *testing.T) {
			d := fixtureDir(t)
			withApproval(t, d)
			h := startHarness(t, Options{Dir: d}, 120, 30)
			h.waitFor("worker 1 asks to run bash")
			h.keys(c.key)
			f := ansi.Strip(h.waitFor(c.status))
			if strings.Contains(f, "asks to run") {
				t.Errorf("the question stays after the answer:\n%s", f)
			}
			b, err := os.ReadFile(d.Approval("1"))
			if err != nil {
				t.Fatal(err)
			}
			var a protocol.ApprovalAnswer
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatal(err)
			}
			if a.Call != "call_7_1" || a.Worker != "1" || a.Approved != c.approved || a.By != "pg-dash" {
				t.Errorf("answer %+v", a)
			}
		})
	}
}

// TestApprovalOtherHost: the answer goes through the team's store, so a
// pg-dash on another host (sharing the store) answers a worker too.
func TestApprovalOtherHost(t *testing.T) {
	d := fixtureDir(t)
	withApproval(t, d)
	h := startHarness(t, Options{Dir: d, Host: proc.Host{Name: "elsewhere"}}, 120, 30)
	h.waitFor("worker 1 asks to run bash", "y approve, n deny")
	h.keys("y")
	h.waitFor("worker 1: approved call call_7_1 (bash)")
	if _, ok, err := d.TakeAnswer("1", "call_7_1"); !ok || err != nil {
		t.Fatalf("no answer for the worker of another host: %v %v", ok, err)
	}
}

// TestNoApprovalNoKeys: without a pending call, y and n do nothing.
func TestNoApprovalNoKeys(t *testing.T) {
	d := fixtureDir(t)
	h := startHarness(t, Options{Dir: d}, 120, 30)
	h.waitFor("retry-after")
	h.keys("y", "n")
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(d.Approval("1")); !os.IsNotExist(err) {
		t.Errorf("an answer was written without a pending approval: %v", err)
	}
}

// TestOnceShowsApproval: the plain and JSON snapshots show the call a
// worker waits on.
func TestOnceShowsApproval(t *testing.T) {
	d := fixtureDir(t)
	withApproval(t, d)
	r := Loader{Dir: d}.Load(jsonl.Pos{}, fixtureNow)
	rec := Record(&r.Snap, fixtureNow, 30*time.Second, nil)
	var text, js strings.Builder
	if err := WriteText(&text, rec); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, rec); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "approval?") {
		t.Errorf("text snapshot does not show the approval:\n%s", text.String())
	}
	if !strings.Contains(js.String(), `"approval":{"call":"call_7_1","tool":"bash"`) {
		t.Errorf("JSON snapshot does not show the approval:\n%s", js.String())
	}
}
