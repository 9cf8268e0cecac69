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
	// On a store several hosts share, a record without an id is no
	// host's: another host of the same name, or one that named none,
	// must not probe the pid in its own /proc (hostile review F6).
	shared := h
	shared.Shared = true
	for _, tc := range []struct {
		name, id string
		want     bool
	}{
		{"box", h.ID, true},
		{"box", HostID("b2", "pid:[4026531836]"), false},
		{"box", "", false},
		{"", "", false},
		{"other", "", false},
	} {
		if got := shared.Owns(tc.name, tc.id); got != tc.want {
			t.Errorf("shared store: Owns(%q, %q) = %v, want %v", tc.name, tc.id, got, tc.want)
		}
	}
}

// A host that cannot read its id says so, once, in one line.
func TestWarnNoHostID(t *testing.T) {
	if _, err := readHostID("/nonexistent/boot_id", pidNSLink); err == nil {
		t.Fatal("readHostID of a missing boot id file: no error")
	}
	_, err := readHostID("/nonexistent/boot_id", pidNSLink)
	var o onceWarning
	var b strings.Builder
	o.warn(&b, "pg-x", nil)
	if b.Len() != 0 {
		t.Fatalf("warned without an error: %q", b.String())
	}
	o.warn(&b, "pg-x", err)
	o.warn(&b, "pg-x", err)
	if !strings.HasPrefix(b.String(), "pg-x: warning: cannot read this host's id (open /nonexistent/boot_id: ") || strings.Count(b.String(), "\n") != 1 || !strings.HasSuffix(b.String(), "\n") {
		t.Fatalf("want one warning line, got %q", b.String())
	}
	// This host has an id: no warning.
	var none strings.Builder
	WarnNoHostID(&none, "pg-x")
	if none.Len() != 0 {
		t.Fatalf("warned on a host with an id: %q", none.String())
	}
}

// A pid_start that is not as the kernel writes it matches no process, and
// ValidStart tells it apart, so that callers treat it as unknown.
func TestValidStart(t *testing.T) {
	for _, s := range []string{"0", "1", "6942482", "18446744073709551615"} {
		if !ValidStart(s) {
			t.Errorf("ValidStart(%q) = false", s)
		}
	}
	for _, s := range []string{"", "06942482", " 6942482", "6942482 ", "+1", "-1", "1e5", "x", "123456789012345678901"} {
		if ValidStart(s) {
			t.Errorf("ValidStart(%q) = true", s)
		}
	}
	pid, start, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if !Matches(pid, start) || Matches(pid, "0"+start) || Matches(pid, " "+start) {
		t.Errorf("Matches(%d, ...) of start %q and its variants", pid, start)
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
