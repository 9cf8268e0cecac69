// Command fakemodel serves a scripted model (llmtest.Script) over the
// Anthropic Messages wire format on a local port, so real sessions can be
// recorded with `pg-llm --record` without a key or a network. It prints its
// base URL on stdout (for ANTHROPIC_BASE_URL) and serves until it is
// signalled. scripts/record-demo.sh uses it to record the demo.
//
//	fakemodel testdata/demo/script.json
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/powerglide/powerglide/pkg/llm/llmtest"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] == "-h" || os.Args[1] == "--help" {
		fmt.Fprintln(os.Stderr, "usage: fakemodel SCRIPT.json")
		os.Exit(2)
	}
	script, err := llmtest.LoadScript(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakemodel: error:", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakemodel: error:", err)
		os.Exit(1)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: script}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "fakemodel: error:", err)
		os.Exit(1)
	}
}
