package cli

import (
	"runtime"
	"runtime/debug"
)

// waiting applies Spec.Waits; stop ends the GC tuning.
func waiting(spec *Spec, getenv func(string) string) (stop func()) {
	if !spec.Waits {
		return func() {}
	}
	if getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	return TuneGC(getenv)
}

// TuneGC sets the collector of a process that waits on pipes and sockets
// with a small heap (pg-loop, pg-llm, pg-tool serve), unless GOGC is set:
// a collection when the heap has grown by smallHeapGC percent while the
// live heap is under smallHeap, by 100 percent above it. stop ends the
// tuning. Below smallHeap the runtime's floor of 4 MB for the heap goal
// is what the RSS is made of (mostly garbage), and a collection of so
// small a heap costs tens of microseconds; above it the heap is live
// data that a lower percent would scan more often for nothing (pg-llm
// serve given whole requests of 1,000 messages: 25% more CPU at 50).
func TuneGC(getenv func(string) string) (stop func()) {
	if getenv("GOGC") != "" {
		return func() {}
	}
	debug.SetGCPercent(smallHeapGC)
	done := make(chan struct{})
	go tuneGC(done)
	return func() { close(done) }
}

const (
	smallHeapGC = 50
	smallHeap   = 4 << 20
)

// tuneGC sets the GC percent after every collection from the live heap it
// left, until done is closed. A finalizer runs once per collection that
// finds its object unreachable: it signals, and a new object is armed.
func tuneGC(done chan struct{}) {
	collected := make(chan struct{}, 1)
	arm := func() {
		runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
			select {
			case collected <- struct{}{}:
			default:
			}
		})
	}
	// The heap in use is read with ReadMemStats, right after the
	// collection: the live heap and what was allocated since, a few
	// microseconds of stopped world once per collection. runtime/metrics
	// would give the live heap alone, but its package init (its table of
	// every metric) costs each start of every tool about 0.1 ms.
	var ms runtime.MemStats
	percent := smallHeapGC
	arm()
	for {
		select {
		case <-done:
			return
		case <-collected:
		}
		runtime.ReadMemStats(&ms)
		want := 100
		if ms.HeapAlloc < smallHeap {
			want = smallHeapGC
		}
		if want != percent {
			debug.SetGCPercent(want)
			percent = want
		}
		arm()
	}
}

// gcSentinel is big enough not to be batched with other tiny objects,
// which would delay its finalizer.
type gcSentinel struct{ _ [16]byte }
