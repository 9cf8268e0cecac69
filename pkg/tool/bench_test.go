package tool

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/sandbox"
)

func benchRoot(b *testing.B) string {
	root := b.TempDir()
	var src strings.Builder
	for i := range 200 {
		fmt.Fprintf(&src, "line %d of a typical source file\n", i)
	}
	if err := os.WriteFile(filepath.Join(root, "file.go"), []byte(src.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return root
}

// BenchmarkCallRead: one read call on a 200-line file, in process.
func BenchmarkCallRead(b *testing.B) {
	s, err := NewSession(Options{Root: benchRoot(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	call := protocol.ToolCall{ID: "1", Name: "read", Input: []byte(`{"path":"file.go"}`)}
	ctx := context.Background()
	for b.Loop() {
		if r := s.Call(ctx, call); !r.OK {
			b.Fatal(*r.Error)
		}
	}
}

// BenchmarkServeRead: serve mode per call: decode the line, run read,
// encode the result (the overhead the design bounds at 0.5 ms).
func BenchmarkServeRead(b *testing.B) {
	s, err := NewSession(Options{Root: benchRoot(b), PersistCwd: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	line := []byte(`{"id":"1","name":"read","input":{"path":"file.go"}}` + "\n")
	const batch = 1000
	input := bytes.Repeat(line, batch)
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		if err := s.Serve(context.Background(), bytes.NewReader(input), io.Discard, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServeLs: a cheaper tool, so the serve machinery's own share shows.
func BenchmarkServeLs(b *testing.B) {
	s, err := NewSession(Options{Root: benchRoot(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	line := []byte(`{"id":"1","name":"ls","input":{}}` + "\n")
	const batch = 1000
	input := bytes.Repeat(line, batch)
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		if err := s.Serve(context.Background(), bytes.NewReader(input), io.Discard, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBashTrue: a bash call of "true" with and without the sandbox,
// the two alternating so that the machine's load weighs on both alike. It
// reports the median of each and their difference (the sandbox's bound: 1
// ms added).
func BenchmarkBashTrue(b *testing.B) {
	sessions := map[sandbox.Mode]*Session{}
	for _, mode := range []sandbox.Mode{sandbox.Off, sandbox.WorkspaceWrite} {
		root := benchRoot(b)
		sb, err := sandbox.New(sandbox.Policy{Mode: mode, Root: root, Home: os.Getenv("HOME")})
		if err != nil {
			b.Fatal(err)
		}
		if sb.Err() != nil {
			b.Fatal(sb.Err())
		}
		s, err := NewSession(Options{Root: root, PersistCwd: true, Sandbox: sb})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		sessions[mode] = s
	}
	call := protocol.ToolCall{ID: "1", Name: "bash", Input: []byte(`{"command":"true"}`)}
	ctx := context.Background()
	times := map[sandbox.Mode][]time.Duration{}
	for b.Loop() {
		for _, mode := range []sandbox.Mode{sandbox.Off, sandbox.WorkspaceWrite} {
			start := time.Now()
			if r := sessions[mode].Call(ctx, call); !r.OK {
				b.Fatal(*r.Error)
			}
			times[mode] = append(times[mode], time.Since(start))
		}
	}
	off, on := median(times[sandbox.Off]), median(times[sandbox.WorkspaceWrite])
	b.ReportMetric(float64(off.Microseconds()), "off-median-us")
	b.ReportMetric(float64(on.Microseconds()), "sandbox-median-us")
	b.ReportMetric(float64((on - off).Microseconds()), "added-us")
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}
