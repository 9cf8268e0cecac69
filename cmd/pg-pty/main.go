// Command pg-pty runs programs under pseudo-terminals and keeps sessions
// with interactive programs.
package main

import (
	"os"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgpty"
)

func main() {
	os.Exit(cli.Main(pgpty.Spec(), os.Args[1:], cli.Std(os.Stdin, os.Stdout, os.Stderr, os.Environ())))
}
