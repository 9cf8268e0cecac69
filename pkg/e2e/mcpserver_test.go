package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/powerglide/powerglide/pkg/internal/testnet"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdMCPServer: mcpserver VAR MODE LOG starts $MCPBIN's server-everything
// in MODE (streamableHttp, sse) on 127.0.0.1, sets VAR to its port once it
// listens, writes its output to LOG and its pid to LOG.pid; it is killed
// when the script ends. The port is free when chosen, outside the
// kernel's ephemeral range (testnet.FreePort); one taken all the same
// before the server binds it (the server exits, or another process
// answers there) is given up for another.
func cmdMCPServer(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: mcpserver VAR MODE LOG")
	}
	bin := filepath.Join(ts.Getenv("MCPBIN"), "mcp-server-everything")
	log := ts.MkAbs(args[2])
	for range 10 {
		port, err := testnet.FreePort("127.0.0.1")
		ts.Check(err)
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
	cmd.Env = append(os.Environ(), "HOME="+ts.Getenv("HOME"), "PORT="+strconv.Itoa(port))
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
