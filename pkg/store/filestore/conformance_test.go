package filestore_test

import (
	"os"
	"testing"

	"github.com/powerglide/powerglide/pkg/store/storetest"
)

func TestMain(m *testing.M) {
	if storetest.IsWorker() {
		os.Exit(storetest.Worker(os.Stderr))
	}
	os.Exit(m.Run())
}

// TestConformance runs the stores' conformance suite against the team
// directory.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Target{
		New: func(t *testing.T) string { return "file:" + t.TempDir() },
	})
}
