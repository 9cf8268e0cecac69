// Command pg-loop runs the Ralph loop, one worker of a team or a single
// task; see pkg/cmd/pgloop.
package main

import (
	"os"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgloop"
)

func main() {
	os.Exit(cli.Main(pgloop.Spec(), os.Args[1:], cli.Std(os.Stdin, os.Stdout, os.Stderr, os.Environ())))
}
