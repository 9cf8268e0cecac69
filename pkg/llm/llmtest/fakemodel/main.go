// Command fakemodel serves a scripted model (llmtest.Script) over the
// Anthropic Messages wire format on a local port, so real sessions can be
// recorded with `pg-llm --record` without a key or a network. It prints its
// base URL on stdout (for ANTHROPIC_BASE_URL) and serves until it is
// signalled. scripts/demo.sh uses it to record the demo, and
// scripts/bench-overhead.sh to time agent loops against it: with -log FILE
// it appends one line per request, "UNIX-NANOSECONDS REQUEST-BYTES", as
// each request arrives.
//
//	fakemodel [-log FILE] testdata/demo/script.json
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/powerglide/powerglide/pkg/llm/llmtest"
)

func main() {
	logPath := flag.String("log", "", "append \"UNIX-NANOSECONDS REQUEST-BYTES\" per request to this file")
	flag.Usage = func() { fmt.Fprintln(os.Stderr, "usage: fakemodel [-log FILE] SCRIPT.json") }
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	script, err := llmtest.LoadScript(flag.Arg(0))
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
	var handler http.Handler = script
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakemodel: error:", err)
			os.Exit(2)
		}
		defer f.Close()
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(f, "%d %d\n", time.Now().UnixNano(), r.ContentLength)
			script.ServeHTTP(w, r)
		})
	}
	srv := &http.Server{Handler: handler}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "fakemodel: error:", err)
		os.Exit(1)
	}
}
