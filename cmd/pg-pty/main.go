// Command pg-pty runs programs under pseudo-terminals and keeps sessions
// with interactive programs.
package main

import (
	"os"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgpty"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == pgpty.HolderArg {
		os.Exit(pgpty.Holder(os.Args[2], os.Stdin, os.Stderr)) // the fast way in for start's holder
	}
	os.Exit(cli.Main(pgpty.Spec(), os.Args[1:], cli.Std(os.Stdin, os.Stdout, os.Stderr, os.Environ())))
}
