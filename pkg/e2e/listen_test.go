package e2e

import (
	"net"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdListen: listen VAR [refuse|silent] sets VAR to a local address
// (127.0.0.1:port) where nothing listens (refuse), or where a listener
// accepts connections and never answers (silent) until the script ends:
// a database server that is down, or that hangs.
func cmdListen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 || (args[1] != "refuse" && args[1] != "silent") {
		ts.Fatalf("usage: listen VAR refuse|silent")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	ts.Setenv(args[0], l.Addr().String())
	if args[1] == "refuse" {
		ts.Check(l.Close())
		return
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	ts.Defer(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
}
