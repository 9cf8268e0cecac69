// Command pg-monitor spawns, supervises and watches a team of workers.
package main

import (
	"os"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgmonitor"
)

func main() {
	os.Exit(cli.Main(pgmonitor.Spec(), os.Args[1:], cli.Std(os.Stdin, os.Stdout, os.Stderr, os.Environ())))
}
