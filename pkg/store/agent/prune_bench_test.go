package agent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkPrune is what pruning costs an agent's start (and exit) in a
// run directory holding the files of 50 other agents that stopped within
// the day (a lock, a log and a .failed note each: all kept): each group
// is two flocks tried and a few stats.
func BenchmarkPrune(b *testing.B) {
	dir := b.TempDir()
	for i := range 50 {
		base := filepath.Join(dir, fmt.Sprintf("store-%016x", i+1))
		for _, s := range []string{".lock", ".log", ".failed"} {
			if err := os.WriteFile(base+s, nil, 0o600); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for range b.N {
		prune(dir, "0000000000000000", time.Now(), io.Discard)
	}
}
