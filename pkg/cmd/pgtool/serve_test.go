package pgtool

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
)

// TestServeGC: serve tunes the collector as pg-loop and pg-llm do
// (cli.TuneGC: the heap near what is live while it is small), unless
// GOGC says otherwise.
func TestServeGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, c := range []struct {
		env  []string
		want int
	}{
		{nil, 50},
		{[]string{"GOGC=200"}, 100},
	} {
		debug.SetGCPercent(100)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		home := t.TempDir()
		out := &syncBuffer{}
		var errb bytes.Buffer
		env := append([]string{"HOME=" + home, "XDG_CONFIG_HOME=" + home, "POWERGLIDE_HOME=" + home, "POWERGLIDE_SANDBOX=off"}, c.env...)
		done := make(chan int)
		go func() {
			done <- cli.Run(context.Background(), Spec(), []string{"serve"}, cli.Test(r, out, &errb, env...))
		}()
		fmt.Fprintln(w, `{"type":"list","id":"1"}`)
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), `"tools"`); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no answer to list: %s", errb.String())
			}
		}
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		if p != c.want {
			t.Errorf("env %q: GC percent while serving %d, want %d", c.env, p, c.want)
		}
		w.Close()
		if code := <-done; code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		r.Close()
	}
}

// syncBuffer is a buffer written by serve while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
