// Command pg-dash shows a powerglide team live in the terminal.
package main

import (
	"os"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgdash"
)

func main() {
	os.Exit(cli.Main(pgdash.Spec(), os.Args[1:], cli.Std(os.Stdin, os.Stdout, os.Stderr, os.Environ())))
}
