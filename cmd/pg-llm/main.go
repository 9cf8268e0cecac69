// Command pg-llm makes one model call (or serves a stream of them) and
// streams the reply as JSON events; see pkg/cmd/pgllm.
package main

import (
	"os"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgllm"
)

func main() {
	os.Exit(cli.Main(pgllm.Spec(), os.Args[1:], cli.Std(os.Stdin, os.Stdout, os.Stderr, os.Environ())))
}
