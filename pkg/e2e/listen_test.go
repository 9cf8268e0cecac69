package e2e

import (
	"github.com/powerglide/powerglide/pkg/internal/testnet"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdListen: listen VAR [refuse|silent] sets VAR to a local address
// (127.0.0.1:port) where nothing listens (refuse), or where a listener
// accepts connections and never answers (silent), until the script ends:
// a database server that is down, or that hangs.
func cmdListen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 || (args[1] != "refuse" && args[1] != "silent") {
		ts.Fatalf("usage: listen VAR refuse|silent")
	}
	listen := testnet.Silent
	if args[1] == "refuse" {
		listen = testnet.Refused
	}
	addr, stop, err := listen()
	ts.Check(err)
	ts.Setenv(args[0], addr)
	ts.Defer(stop)
}
