package tool

import (
	"runtime"
	"testing"
)

// TestProcessors: a narrowed process runs on one processor; searches take
// them all back while any of them runs; GOMAXPROCS in the environment
// leaves the process alone.
func TestProcessors(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	defer func() { procs.base, procs.wide, procs.users = 0, 0, 0 }()

	NarrowProcessors(func(string) string { return "3" })
	if got := runtime.GOMAXPROCS(0); got != 4 {
		t.Fatalf("with GOMAXPROCS set: %d processors, want 4 (untouched)", got)
	}
	NarrowProcessors(func(string) string { return "" })
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("narrowed: %d processors, want 1", got)
	}
	done1 := widen()
	done2 := widen()
	if got := runtime.GOMAXPROCS(0); got != 4 {
		t.Fatalf("during searches: %d processors, want 4", got)
	}
	done1()
	if got := runtime.GOMAXPROCS(0); got != 4 {
		t.Fatalf("while a search still runs: %d processors, want 4", got)
	}
	done2()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("after the searches: %d processors, want 1", got)
	}
}
