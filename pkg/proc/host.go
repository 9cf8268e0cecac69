package proc

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"sync"
)

// Host is where a recorded pid means something. A pid names a process only
// inside one pid namespace of one running kernel: two machines, or two
// containers of one machine, can run different processes under the same
// pid, and may well share a host name (cloned VMs, containers on the host's
// network). Records carry both: Name for people, ID for the check.
type Host struct {
	Name string // the host name (os.Hostname); "" when unknown
	// ID names the running kernel and the pid namespace (see HostID);
	// "" when /proc does not tell.
	ID string
}

// ThisHost is the host of this process, computed once.
func ThisHost() Host { return thisHost() }

var thisHost = sync.OnceValue(func() Host {
	name, _ := os.Hostname()
	return Host{Name: name, ID: readHostID()}
})

// readHostID reads this process's kernel boot and pid namespace.
func readHostID() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return HostID(string(boot), ns)
}

// HostID is the id of pid namespace ns ("pid:[4026531836]", the link
// /proc/self/ns/pid) on the kernel whose boot id is boot
// (/proc/sys/kernel/random/boot_id): a short hash of both. The boot id is
// random at every boot of every kernel and shared by all its containers,
// the one scope in which namespace numbers are unique; the namespace tells
// the pid numberings of that kernel apart. /etc/machine-id is no use here:
// clones and container images share it, and the initial pid namespace has
// the same number on every Linux. The start times of pid_start count from
// the boot, too, so a record of an earlier boot is no longer this host's.
func HostID(boot, ns string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(boot) + "\n" + strings.TrimSpace(ns)))
	return hex.EncodeToString(sum[:8])
}

// Owns reports whether a record written on the host named name with id id
// names pids of h: only those may be checked in /proc or signalled. With
// an id, it must be h's (a host that cannot read its own id owns none).
// Without one (records of older versions, and of workers that write their
// record themselves), the names must match, and a record that names no
// host is taken as this host's, as the team directory is one host's.
func (h Host) Owns(name, id string) bool {
	if id != "" {
		return h.ID != "" && id == h.ID
	}
	return name == "" || name == h.Name
}
