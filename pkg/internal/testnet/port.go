package testnet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
)

// FreePort returns a TCP port that nothing holds on host now, for a
// server a test starts on it later (or again, after a stop). It is chosen
// outside the kernel's ephemeral range (ip_local_port_range), where
// listeners on port 0 and outgoing connections take theirs: with a port
// from inside it, any of the tests running alongside could take the port
// before the server binds it.
func FreePort(host string) (int, error) {
	lo, hi := ephemeralPorts()
	var err error
	for range 100 {
		port := portOutside(lo, hi)
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on %s outside the ephemeral range %d-%d: %w", host, lo, hi, err)
}

// ephemeralPorts is the kernel's range of ports for port 0 and outgoing
// connections.
func ephemeralPorts() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if _, serr := fmt.Sscan(string(b), &lo, &hi); err != nil || serr != nil || lo > hi {
		return 32768, 60999 // Linux's default
	}
	return lo, hi
}

// portOutside picks a port above 1023 outside [lo, hi], or any port above
// 1023 when there is none.
func portOutside(lo, hi int) int {
	below, above := max(lo-1024, 0), max(65535-max(hi, 1023), 0)
	if below+above == 0 {
		return 1024 + rand.IntN(65535-1023)
	}
	n := rand.IntN(below + above)
	if n < below {
		return 1024 + n
	}
	return hi + 1 + n - below
}
