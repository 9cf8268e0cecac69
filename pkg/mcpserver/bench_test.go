package mcpserver

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/powerglide/powerglide/pkg/tool"
)

// BenchmarkCallRead: one read call of a 200-line file, round trip, through
// pg-tool serve's JSON Lines and through MCP's JSON-RPC lines, over pipes
// as over stdio. The bound: mcp within 1.5× of serve (compare
// cpu-ns/op on a busy machine).
func BenchmarkCallRead(b *testing.B) {
	root := b.TempDir()
	var text strings.Builder
	for i := range 200 {
		text.WriteString("line of a typical source file " + string(rune('0'+i%10)) + "\n")
	}
	if err := os.WriteFile(filepath.Join(root, "file.go"), []byte(text.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	session := func(b *testing.B) *tool.Session {
		s, err := tool.NewSession(tool.Options{Root: root, PersistCwd: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// One P: with two, the scheduler spins while one end of a pipe waits
	// for the other, CPU time that is no work and that the machine's load
	// makes vary; MCP's extra goroutine hops would be charged most.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))

	b.Run("serve", func(b *testing.B) {
		s := session(b)
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		go func() { _ = s.Serve(ctx, inR, outW, 1); outW.Close() }()
		results := bufio.NewReader(outR)
		line := []byte(`{"id":"1","name":"read","input":{"path":"file.go"}}` + "\n")
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for b.Loop() {
			if _, err := inW.Write(line); err != nil {
				b.Fatal(err)
			}
			res, err := results.ReadBytes('\n')
			if err != nil || !strings.Contains(string(res), `"ok":true`) {
				b.Fatalf("%s %v", res, err)
			}
		}
		inW.Close()
	})

	// The client's side is a line written and a line read, as for serve:
	// what is measured is pg-tool mcp's own cost per call.
	b.Run("mcp", func(b *testing.B) {
		s := session(b)
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		go func() { _ = Serve(ctx, s, inR, outW, "bench", io.Discard); outW.Close() }()
		results := bufio.NewReader(outR)
		send := func(line string) {
			if _, err := io.WriteString(inW, line+"\n"); err != nil {
				b.Fatal(err)
			}
		}
		send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
		if res, err := results.ReadBytes('\n'); err != nil || !strings.Contains(string(res), `"serverInfo"`) {
			b.Fatalf("initialize: %s %v", res, err)
		}
		send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"path":"file.go"}}}`
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for b.Loop() {
			send(call)
			res, err := results.ReadBytes('\n')
			if err != nil || !strings.Contains(string(res), `"id":1,"result":{`) || strings.Contains(string(res), `"isError":true`) {
				b.Fatalf("%s %v", res, err)
			}
		}
		inW.Close()
	})
}

// cpuPerOp reports the process's CPU time (user and system, every
// goroutine: both ends of the pipes) per call as cpu-ns/op, a figure the
// load of a shared machine moves much less than the wall clock.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
