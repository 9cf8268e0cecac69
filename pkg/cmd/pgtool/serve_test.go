package pgtool

import (
	"runtime/debug"
	"testing"
)

// TestServeGC: serve keeps the heap near what is live, unless GOGC says
// otherwise.
func TestServeGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	serveGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != 25 {
		t.Errorf("GC percent without GOGC: %d, want 25", got)
	}
	serveGC(func(k string) string {
		if k == "GOGC" {
			return "200"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent with GOGC set: %d, want it left alone (100)", got)
	}
}
