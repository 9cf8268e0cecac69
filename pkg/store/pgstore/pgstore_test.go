package pgstore_test

import (
	"os"
	"testing"

	"github.com/powerglide/powerglide/pkg/store/pgtest"
	"github.com/powerglide/powerglide/pkg/store/storetest"
)

func TestMain(m *testing.M) {
	if storetest.IsWorker() {
		os.Exit(storetest.Worker(os.Stderr))
	}
	os.Exit(pgtest.Main(m))
}

// TestConformance runs the stores' conformance suite against PostgreSQL,
// on a server of its own: WatchAcrossRestart restarts it.
func TestConformance(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	storetest.Run(t, storetest.Target{
		New: func(t *testing.T) string { return srv.DB(t) },
		Restart: func(t *testing.T) {
			if err := srv.Restart(); err != nil {
				t.Fatalf("restart postgres: %v", err)
			}
		},
	})
}

// TestConformanceOneShot runs the suite as pg-queue's commands use the
// store (dial.Options.OneShot): statements sent unprepared
// (QueryExecModeExec), their parameters typed from Go's types, the schema
// checked in the round trip of the first change, and a change's NOTIFY
// sent in its round trip.
func TestConformanceOneShot(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	storetest.Run(t, storetest.Target{
		New:     func(t *testing.T) string { return srv.DB(t) },
		OneShot: true,
		Restart: func(t *testing.T) {
			if err := srv.Restart(); err != nil {
				t.Fatalf("restart postgres: %v", err)
			}
		},
	})
}
