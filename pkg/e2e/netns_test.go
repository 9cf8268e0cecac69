package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lab is a small network of simulated hosts on this machine: one network
// namespace per host, each with its own eth0 on a bridge in the root
// namespace, and the root namespace on the same bridge through a veth pair
// whose address (DB) is where a server for every host listens. A host's
// processes also get a pid namespace of their own, as on another machine
// (where a pid means another process), and a UTS namespace with their
// host name.
//
//	root ns: DB ── veth ── bridge ── veth ── eth0 (host 1, its own netns)
//	                          ├───── veth ── eth0 (host 2)
//	                          └───── veth ── eth0 (host 3)
//
// Names carry this process's pid, so concurrent test runs do not meet.
type lab struct {
	t      *testing.T
	id     string
	DB     string   // the server's address in the root namespace
	Hosts  []string // the hosts' names: h1, h2, ...
	Names  []string // their host names: Hosts, unless the test makes two alike
	Addrs  []string // their eth0 addresses
	netns  []string // their namespaces
	links  []string // their veth ends in the root namespace
	bridge string
	dbLink string
}

// needRealPart stops a test that cannot run its real part: a failure
// under CI=true, a skip (saying why) elsewhere.
func needRealPart(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format+" (a failure under CI=true)", args...)
}

// newLab builds a network of n hosts, removed when the test ends. It needs
// root (CAP_NET_ADMIN, CAP_SYS_ADMIN), ip (iproute2) and unshare
// (util-linux).
func newLab(t *testing.T, n int) *lab {
	t.Helper()
	if os.Geteuid() != 0 {
		needRealPart(t, "the multi-host test makes network namespaces: it must run as root")
	}
	for _, p := range []string{"ip", "unshare", "hostname"} {
		if _, err := exec.LookPath(p); err != nil {
			needRealPart(t, "the multi-host test needs %s (scripts/test-deps.sh installs it)", p)
		}
	}
	id := strconv.Itoa(os.Getpid())
	l := &lab{t: t, id: id, bridge: "pgmh" + id + "br", dbLink: "pgmh" + id + "db"}
	t.Cleanup(l.remove)
	subnet := l.freeSubnet()
	l.DB = subnet + ".1"
	steps := [][]string{
		{"link", "add", l.bridge, "type", "bridge"},
		{"link", "set", l.bridge, "up"},
		// The server's side: a veth pair, one end on the bridge, the
		// other holding the address.
		{"link", "add", l.dbLink, "type", "veth", "peer", "name", "pgmh" + id + "dp"},
		{"link", "set", "pgmh" + id + "dp", "master", l.bridge, "up"},
		{"addr", "add", l.DB + "/24", "dev", l.dbLink},
		{"link", "set", l.dbLink, "up"},
	}
	for _, s := range steps {
		if err := l.ip(s...); err != nil {
			needRealPart(t, "make the lab network: %v", err)
		}
	}
	// The root namespace would answer the hosts' ARP for DB on the bridge
	// too, with the bridge's MAC, which changes when a host's port goes:
	// only the veth that holds DB answers.
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+l.bridge+"/arp_ignore", []byte("1"), 0o644); err != nil {
		needRealPart(t, "make the lab network: %v", err)
	}
	for i := 1; i <= n; i++ {
		host := fmt.Sprintf("h%d", i)
		ns, link, addr := "pgmh"+id+"-"+host, "pgmh"+id+host, fmt.Sprintf("%s.%d", subnet, 10+i)
		if err := l.ip("netns", "add", ns); err != nil {
			needRealPart(t, "make the network namespace of host %s: %v", host, err)
		}
		l.netns = append(l.netns, ns)
		for _, s := range [][]string{
			{"link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"link", "set", link, "master", l.bridge, "up"},
			{"-n", ns, "addr", "add", addr + "/24", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
			{"-n", ns, "link", "set", "lo", "up"},
		} {
			if err := l.ip(s...); err != nil {
				needRealPart(t, "connect host %s: %v", host, err)
			}
		}
		l.links = append(l.links, link)
		l.Hosts = append(l.Hosts, host)
		l.Names = append(l.Names, host)
		l.Addrs = append(l.Addrs, addr)
	}
	return l
}

// freeSubnet picks a /24 in 10.200.0.0-10.249.255.0 that no interface of
// the root namespace is on.
func (l *lab) freeSubnet() string {
	for range 50 {
		net := fmt.Sprintf("10.%d.%d", 200+rand.IntN(50), rand.IntN(256))
		out, err := exec.Command("ip", "-o", "addr", "show", "to", net+".0/24").Output()
		if err == nil && len(strings.TrimSpace(string(out))) == 0 {
			return net
		}
	}
	needRealPart(l.t, "no free 10.2xx.x.0/24 subnet for the lab network")
	return ""
}

func (l *lab) ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Command runs argv on host i (0-based): in its network namespace, in a
// UTS namespace of its own whose hostname is Names[i], so the tools'
// records say which host they ran on, and in a pid namespace of its own
// (with its /proc), whose first process, the shell, reaps orphans and
// whose end ends every process left in it.
func (l *lab) Command(ctx context.Context, i int, argv ...string) *exec.Cmd {
	args := append([]string{"netns", "exec", l.netns[i], "unshare", "--uts", "--pid", "--fork", "--mount-proc", "--",
		"sh", "-c", `hostname "$0" && "$@"`, l.Names[i]}, argv...)
	cmd := exec.CommandContext(ctx, "ip", args...)
	// Its own process group, so a signal to the test's group (Ctrl-C)
	// does not reach it before the test has stopped it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { l.KillAll(i); return nil }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Pids lists the processes in host i's network namespace.
func (l *lab) Pids(i int) []int {
	out, err := exec.Command("ip", "netns", "pids", l.netns[i]).Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// KillAll SIGKILLs every process of host i, again and again until none is
// left (a process may fork while its siblings die), and returns how many
// it killed.
func (l *lab) KillAll(i int) int {
	killed := map[int]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := l.Pids(i)
		if len(pids) == 0 {
			return len(killed)
		}
		if time.Now().After(deadline) {
			l.t.Errorf("host %s: processes left after 10s of SIGKILL: %v", l.Hosts[i], pids)
			return len(killed)
		}
		for _, p := range pids {
			if syscall.Kill(p, syscall.SIGKILL) == nil {
				killed[p] = true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Cut takes host i off the network: its veth pair is deleted, so its eth0
// is gone.
func (l *lab) Cut(i int) error {
	return l.ip("link", "del", l.links[i])
}

// Reaches reports whether host i can open a TCP connection to addr (bash's
// /dev/tcp, from inside its namespace, within 2s).
func (l *lab) Reaches(i int, addr string) bool {
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("ip", "netns", "exec", l.netns[i], "timeout", "2", "bash", "-c", `exec 3<>"/dev/tcp/$0/$1"`, host, port)
	return cmd.Run() == nil
}

// remove kills what is left on the hosts and deletes the namespaces, the
// links and the bridge.
func (l *lab) remove() {
	for i := range l.netns {
		l.KillAll(i)
		_ = l.ip("netns", "del", l.netns[i])
	}
	for _, link := range append(l.links, l.dbLink, l.bridge) {
		if exec.Command("ip", "link", "show", link).Run() == nil {
			_ = l.ip("link", "del", link)
		}
	}
}
