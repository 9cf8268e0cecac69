// Command pgfake is the zero-latency model and tool stand-in used by
// scripts/bench-loop.sh: pgfake llm STEPS | pgfake tools | pgfake list.
package main

import (
	"fmt"
	"os"

	"github.com/powerglide/powerglide/pkg/loop/internal/fake"
)

func main() {
	if err := fake.Main(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pgfake:", err)
		os.Exit(1)
	}
}
