package testnet

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRefused: connections are refused, the port cannot be listened on
// (Go's listeners set SO_REUSEADDR) while it is held, and can after.
func TestRefused(t *testing.T) {
	addr, release, err := Refused()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("addr %q", addr)
	}
	for range 3 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			c.Close()
			t.Fatal("a connection to the refused address was accepted")
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial: %v, want connection refused", err)
		}
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatal("another socket listens on the held port")
	} else if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("listen on the held port: %v, want address in use", err)
	}
	release()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen after release: %v", err)
	}
	l.Close()
}

// TestSilent: connections are accepted and never answered, until stop.
func TestSilent(t *testing.T) {
	addr, stop, err := Silent()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); n != 0 || !isTimeout(err) {
		t.Fatalf("read: %d %v, want a timeout", n, err)
	}
	stop()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read after stop: %v, want the connection closed", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestFreePort: a port outside the ephemeral range that can be listened
// on.
func TestFreePort(t *testing.T) {
	lo, hi := ephemeralPorts()
	for range 20 {
		port, err := FreePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if port < 1024 || port > 65535 || port >= lo && port <= hi {
			t.Fatalf("port %d: want one above 1023 outside the ephemeral range %d-%d", port, lo, hi)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("listen on the free port: %v", err)
		}
		l.Close()
	}
	for _, r := range [][2]int{{32768, 60999}, {1024, 65535}, {1024, 60999}, {32768, 65535}, {2000, 2000}} {
		for range 1000 {
			p := portOutside(r[0], r[1])
			inside := p >= r[0] && p <= r[1]
			if p < 1024 || p > 65535 || inside && !(r[0] == 1024 && r[1] == 65535) {
				t.Fatalf("range %v: port %d", r, p)
			}
		}
	}
}
