package proc

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
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
	// Shared says that the records come from a store several hosts share
	// (PostgreSQL): a record's host name then proves nothing, and only
	// its host_id can make it this host's.
	Shared bool
}

// ThisHost is the host of this process, computed once.
func ThisHost() Host { h, _ := thisHost(); return h }

var thisHost = sync.OnceValues(func() (Host, error) {
	name, _ := os.Hostname()
	id, err := readHostID(bootIDFile, pidNSLink)
	return Host{Name: name, ID: id}, err
})

// The files the host id is read from.
const (
	bootIDFile = "/proc/sys/kernel/random/boot_id"
	pidNSLink  = "/proc/self/ns/pid"
)

// readHostID reads this process's kernel boot and pid namespace.
func readHostID(bootFile, nsLink string) (string, error) {
	boot, err := os.ReadFile(bootFile)
	if err != nil {
		return "", err
	}
	ns, err := os.Readlink(nsLink)
	if err != nil {
		return "", err
	}
	return HostID(string(boot), ns), nil
}

// WarnNoHostID writes one warning line to w, once per process, when this
// host cannot read its id: the records it writes then carry no host_id,
// and on a store several hosts share no monitor (not even this host's)
// checks or stops their processes; they are left to their leases.
func WarnNoHostID(w io.Writer, tool string) {
	_, err := thisHost()
	noHostID.warn(w, tool, err)
}

var noHostID onceWarning

// onceWarning writes its warning the first time it is given an error.
type onceWarning struct{ sync.Once }

func (o *onceWarning) warn(w io.Writer, tool string, err error) {
	if err == nil {
		return
	}
	o.Do(func() {
		fmt.Fprintf(w, "%s: warning: cannot read this host's id (%v): worker records written here carry no host_id, and on a shared store no monitor checks or stops their processes (they are left to their leases)\n", tool, err)
	})
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
// Without one (records of older versions, of workers that write their
// record themselves, of a host that cannot read its id, or edited by
// hand), it depends on the store. One several hosts share (h.Shared)
// holds records of hosts with the same name (cloned machines, containers
// on the host's network) and of hosts that named none: such a record is
// no host's, and is left to its lease. The team directory is one host's:
// there the names must match, and a record that names no host is this
// host's.
func (h Host) Owns(name, id string) bool {
	if id != "" {
		return h.ID != "" && id == h.ID
	}
	if h.Shared {
		return false
	}
	return name == "" || name == h.Name
}
