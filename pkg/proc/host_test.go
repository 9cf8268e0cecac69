package proc

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/internal/testenv"
)

func TestHostOwns(t *testing.T) {
	h := Host{Name: "box", ID: HostID("b1", "pid:[4026531836]")}
	for _, tc := range []struct {
		name, id string
		want     bool
	}{
		{"box", h.ID, true},
		{"renamed", h.ID, true},                          // the id decides, not the name
		{"box", HostID("b2", "pid:[4026531836]"), false}, // another kernel: another machine, or a reboot
		{"box", HostID("b1", "pid:[4026532200]"), false}, // another pid namespace: a container
		{"box", "", true},                                // an old record: the name decides
		{"", "", true},                                   // a record that names no host: the team directory's
		{"other", "", false},
	} {
		if got := h.Owns(tc.name, tc.id); got != tc.want {
			t.Errorf("Owns(%q, %q) = %v, want %v", tc.name, tc.id, got, tc.want)
		}
	}
	// A host that cannot tell its id owns no record that has one.
	if (Host{Name: "box"}).Owns("box", h.ID) {
		t.Error("a host without an id owns a record with one")
	}
	if (Host{}).Owns("box", "") {
		t.Error("a host without a name owns a record of a named host")
	}
}

// ThisHost's id changes with the pid namespace, and is the same for every
// process of one namespace.
func TestThisHostID(t *testing.T) {
	h := ThisHost()
	if h.ID == "" || len(h.ID) != 16 {
		t.Fatalf("ThisHost() = %+v, want a 16-digit id", h)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	out, err := exec.Command("readlink", "/proc/self/ns/pid").Output()
	if err != nil {
		t.Fatal(err)
	}
	if id := HostID(string(boot), strings.TrimSpace(string(out))); id != h.ID {
		t.Errorf("another process of this namespace has id %s, this one %s", id, h.ID)
	}
	out, err = exec.Command("unshare", "--pid", "--fork", "readlink", "/proc/self/ns/pid").Output()
	if err != nil {
		testenv.Unavailable(t, "no pid namespace (unshare --pid --fork)", err)
	}
	if id := HostID(string(boot), strings.TrimSpace(string(out))); id == h.ID {
		t.Errorf("a process of another pid namespace has this one's id %s", id)
	}
}
