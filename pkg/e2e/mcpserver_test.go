package e2e

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdMCPServer: mcpserver VAR MODE LOG starts $MCPBIN's server-everything
// in MODE (streamableHttp, sse) on 127.0.0.1, sets VAR to its port once it
// listens, writes its output to LOG and its pid to LOG.pid; it is killed
// when the script ends. (A port found free and bound later by the server
// may be taken meanwhile by any test running alongside.) The port is
// chosen outside the kernel's ephemeral range, where no listener on port 0
// and no outgoing connection takes one; one that is taken all the same
// (the server exits, or another process answers there) is given up for
// another.
func cmdMCPServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: mcpserver VAR MODE LOG")
	}
	bin := filepath.Join(ts.Getenv("MCPBIN"), "mcp-server-everything")
	log := ts.MkAbs(args[2])
	lo, hi := ephemeralPorts()
	for range 10 {
		port := portOutside(lo, hi)
		if !free(port) {
			continue
		}
		if pid, ok := startEverything(ts, bin, args[1], log, port); ok {
			ts.Check(os.WriteFile(log+".pid", []byte(strconv.Itoa(pid)+"\n"), 0o644))
			ts.Setenv(args[0], strconv.Itoa(port))
			return
		}
	}
	b, _ := os.ReadFile(log)
	ts.Fatalf("mcp-server-everything %s did not listen and answer on 127.0.0.1 on any of 10 ports; last output:\n%s", args[1], b)
}

// startEverything starts the server on port and waits until it says it
// listens and answers there (true), or exits (false); a server that does
// not answer there is killed at once.
func startEverything(ts *testscript.TestScript, bin, mode, log string, port int) (pid int, ok bool) {
	out, err := os.Create(log)
	ts.Check(err)
	defer out.Close()
	cmd := exec.Command(bin, mode)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = out, out
	ts.Check(cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() { _ = cmd.Process.Kill(); <-exited }
	ts.Defer(stop)
	listening := regexp.MustCompile(`on port ` + strconv.Itoa(port) + `\b`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(log)
		if listening.Match(b) {
			// It says so, but is it the one 127.0.0.1:port reaches?
			if answers(port) {
				return cmd.Process.Pid, true
			}
			stop()
			return 0, false
		}
		select {
		case <-exited:
			return 0, false
		default:
		}
		if time.Now().After(deadline) {
			ts.Fatalf("mcp-server-everything %s on port %d: not listening after 30 s; output:\n%s", mode, port, b)
		}
	}
}

// free reports whether nothing holds port on 127.0.0.1 now: the server
// listens on every address, and one listening on 127.0.0.1 alone would
// take its connections.
func free(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// answers reports whether an HTTP request to 127.0.0.1:port is answered
// by the server (an Express app).
func answers(port int) bool {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/pg-e2e-probe")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.Header.Get("X-Powered-By") == "Express"
}

// ephemeralPorts is the kernel's range of ports for port 0 and outgoing
// connections.
func ephemeralPorts() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if _, serr := fmt.Sscan(string(b), &lo, &hi); err != nil || serr != nil {
		return 32768, 60999 // Linux's default
	}
	return lo, hi
}

// portOutside picks a port above 1023 outside [lo, hi].
func portOutside(lo, hi int) int {
	below, above := max(lo-1024, 0), max(65535-hi, 0)
	if below+above == 0 {
		return 1024 + rand.IntN(64512) // no port outside: any
	}
	n := rand.IntN(below + above)
	if n < below {
		return 1024 + n
	}
	return hi + 1 + n - below
}
