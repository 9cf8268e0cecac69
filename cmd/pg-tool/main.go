// Command pg-tool is the agent's hands: built-in, external and MCP tools
// confined to a workspace; see pkg/cmd/pgtool.
package main

import (
	"os"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgtool"
)

func main() {
	if code, ok := pgtool.Init(os.Args[1:], os.Environ(), os.Stderr); ok {
		os.Exit(code) // the fast way in for the init of a sandboxed program
	}
	os.Exit(cli.Main(pgtool.Spec(), os.Args[1:], cli.Std(os.Stdin, os.Stdout, os.Stderr, os.Environ())))
}
