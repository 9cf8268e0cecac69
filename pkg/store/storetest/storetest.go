// Package storetest is the conformance suite of the team stores (issue
// 17): the same tests, unchanged, against the file store and PostgreSQL,
// so that both keep the queue's semantics. A store's test package runs it:
//
//	func TestMain(m *testing.M) {
//		if storetest.IsWorker() {
//			os.Exit(storetest.Worker())
//		}
//		os.Exit(m.Run())
//	}
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Target{New: func(t *testing.T) string { ... }})
//	}
//
// The process tests start the test binary again as claim workers
// (IsWorker, Worker), which open the store by its URL through dial.
package storetest

import (
	"context"
	"testing"

	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/dial"
	_ "github.com/powerglide/powerglide/pkg/store/dial/pgdial" // opens PostgreSQL stores itself
)

// Target is a store under test.
type Target struct {
	// New makes an empty store and returns its URL, as dial.Open reads
	// it ("file:/tmp/…", "postgres://…"). Each call is a store of its own.
	New func(t *testing.T) string
	// Restart restarts the store's server; nil for a store without one.
	Restart func(t *testing.T)
	// OneShot opens every store as pg-queue's commands do
	// (dial.Options.OneShot), in the test and in its worker processes.
	OneShot bool
	// Open, when set, opens every store of the test instead of dial (a
	// client of the store agent, say); its worker processes then need
	// WorkerOpen with the same.
	Open func(url string) (store.Store, error)
}

// open opens the store of url as dial does for target.
func open(url string, oneShot bool) (store.Store, error) {
	return dial.OpenContext(context.Background(), url, dial.Options{OneShot: oneShot})
}

// open opens the store of url as the target wants.
func (t Target) open(url string) (store.Store, error) {
	if t.Open != nil {
		return t.Open(url)
	}
	return open(url, t.OneShot)
}

// Run runs every conformance test against target.
func Run(t *testing.T, target Target) {
	tests := []struct {
		name string
		fn   func(t *testing.T, e *env)
	}{
		{"TeamName", testTeamName},
		{"AddListShow", testAddListShow},
		{"AddValidation", testAddValidation},
		{"ClaimOrder", testClaimOrder},
		{"Dependencies", testDependencies},
		{"LeaseExpiryAndFencing", testLeaseExpiryAndFencing},
		{"ExpiryExhaustsAttempts", testExpiryExhaustsAttempts},
		{"CompleteFailRelease", testCompleteFailRelease},
		{"ReleaseWorker", testReleaseWorker},
		{"Cancel", testCancel},
		{"ArchiveAndPrune", testArchiveAndPrune},
		{"Stats", testStats},
		{"WaitClaim", testWaitClaim},
		{"ClaimID", testClaimID},
		{"JournalOrder", testJournalOrder},
		{"FollowConcurrentAppends", testFollowConcurrentAppends},
		{"WatchAcrossRestart", testWatchAcrossRestart},
		{"Workers", testWorkers},
		{"WorkerKeys", testWorkerKeys},
		{"Approvals", testApprovals},
		{"Budget", testBudget},
		{"ExactlyOnceGoroutines", testExactlyOnceGoroutines},
		{"ExactlyOnceProcessesKilled", testExactlyOnceProcesses},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url := target.New(t)
			s, err := target.open(url)
			if err != nil {
				t.Fatalf("open %s: %v", url, err)
			}
			t.Cleanup(func() { s.Close() })
			tm, err := s.Team("t")
			if err != nil {
				t.Fatal(err)
			}
			tc.fn(t, &env{target: target, url: url, store: s, team: tm})
		})
	}
}

// env is what a test gets: a fresh store and its team "t".
type env struct {
	target Target
	url    string
	store  store.Store
	team   store.Team
}

func (e *env) tasks() store.Tasks { return e.team.Tasks() }
