// Command pg-queue is the team task queue; see pkg/cmd/pgqueue.
package main

import (
	"os"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgqueue"
)

func main() {
	os.Exit(cli.Main(pgqueue.Spec(), os.Args[1:], cli.Std(os.Stdin, os.Stdout, os.Stderr, os.Environ())))
}
