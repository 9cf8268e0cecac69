package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestServeList: a list request among the calls is answered in order,
// with its id and the definitions pg-tool list prints; a malformed one
// is an error record naming its line.
func TestServeList(t *testing.T) {
	s, err := NewSession(Options{Root: t.TempDir(), Allow: []string{"read", "ls"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := `{"id":"1","name":"ls","input":{}}` + "\n" + `{"type":"list","id":"L"}` + "\n" + `{"type":"list","id":"M","name":"x"}` + "\n"
	var out bytes.Buffer
	if err := s.Serve(context.Background(), strings.NewReader(in), &out, 1); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 records, got %q", out.String())
	}
	var ev struct {
		Type  string `json:"type"`
		ID    string `json:"id"`
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Error *string `json:"error"`
	}
	if err := json.Unmarshal([]byte(lines[1]), &ev); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range ev.Tools {
		names = append(names, d.Name)
		if len(d.InputSchema) == 0 {
			t.Errorf("%s has no input_schema", d.Name)
		}
	}
	if ev.Type != "tools" || ev.ID != "L" || ev.Error != nil || strings.Join(names, ",") != "read,ls" {
		t.Errorf("list answer: %s", lines[1])
	}
	if !strings.Contains(lines[2], `"type":"error"`) || !strings.Contains(lines[2], "line 3") || !strings.Contains(lines[2], "name") {
		t.Errorf("malformed list request: %s", lines[2])
	}
}

// FuzzServe: any input yields one JSON record per non-blank line and never
// a panic. Only harmless read-only tools are allowed, so fuzzed calls
// cannot run commands.
func FuzzServe(f *testing.F) {
	f.Add([]byte(`{"id":"1","name":"ls","input":{}}` + "\n"))
	f.Add([]byte(`{"id":"1","name":"read","input":{"path":"x"}}` + "\n" + `garbage` + "\n"))
	f.Add([]byte(`{"id":1}` + "\n\n" + `{"name":"grep","input":{"pattern":"("}}`))
	f.Add([]byte(`{"id":"a","name":"glob","input":{"pattern":"**"},"extra":1}`))
	f.Add([]byte(`{"type":"list","id":"l"}` + "\n" + `{"type":"list","id":"l","x":1}`))
	root := f.TempDir()
	s, err := NewSession(Options{Root: root, Allow: []string{"read", "ls", "glob", "grep"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		if err := s.Serve(context.Background(), bytes.NewReader(in), &out, 1); err != nil {
			t.Fatalf("serve: %v", err)
		}
		want := 0
		for _, l := range strings.Split(strings.ReplaceAll(string(in), "\r", ""), "\n") {
			if strings.TrimSpace(l) != "" {
				want++
			}
		}
		got := 0
		for _, l := range strings.Split(out.String(), "\n") {
			if l == "" {
				continue
			}
			got++
			var rec map[string]any
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatalf("output line is not JSON: %q", l)
			}
			if rec["type"] != "result" && rec["type"] != "error" && rec["type"] != "tools" {
				t.Fatalf("bad record type: %q", l)
			}
		}
		if got != want {
			t.Fatalf("%d non-blank input lines, %d output records\ninput %q\noutput %s", want, got, in, out.String())
		}
	})
}

// Parallel edits of one file must all land.
func TestParallelEditsOfOneFile(t *testing.T) {
	root := t.TempDir()
	var content, calls strings.Builder
	for i := range 40 {
		fmt.Fprintf(&content, "line %d\n", i)
		fmt.Fprintf(&calls, `{"id":"%d","name":"edit","input":{"path":"f.txt","old_string":"line %d\n","new_string":"LINE %d\n"}}`+"\n", i, i, i)
	}
	if err := os.WriteFile(filepath.Join(root, "f.txt"), []byte(content.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out bytes.Buffer
	if err := s.Serve(context.Background(), strings.NewReader(calls.String()), &out, 8); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), `"ok":true`); n != 40 {
		t.Fatalf("%d of 40 edits ok:\n%s", n, out.String())
	}
	got, _ := os.ReadFile(filepath.Join(root, "f.txt"))
	if strings.Contains(string(got), "line ") {
		t.Fatalf("edits lost:\n%s", got)
	}
}

// A cancelled context ends serve although stdin stays open, and the call
// in flight is stopped.
func TestServeStopsOnCancel(t *testing.T) {
	root := t.TempDir()
	s, err := NewSession(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, pr, &lockedWriter{w: &out}, 1) }()
	if _, err := pw.Write([]byte(`{"id":"slow","name":"bash","input":{"command":"touch started; sleep 30"}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	// Cancelled once the call runs: before, serve could stop without it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(root, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never started")
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop on cancel")
	}
	if !strings.Contains(out.String(), `"id":"slow"`) || !strings.Contains(out.String(), `"ok":false`) {
		t.Fatalf("the cancelled call has no result: %s", out.String())
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
