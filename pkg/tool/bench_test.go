package tool

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
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
