package tool

import (
	"runtime"
	"sync"
)

// procs is how many processors the process runs on. A tool server
// (pg-tool serve) runs on one between searches: a bash call hands its
// work from goroutine to goroutine (the line read, the call, the
// sandbox's launcher thread, the command's exit and output), and on one
// processor each hand-off is a switch within a thread, not the wake-up of
// another. A search (grep) takes every processor back while it runs.
var procs struct {
	mu    sync.Mutex
	base  int // GOMAXPROCS between searches; 0: never narrowed
	wide  int // GOMAXPROCS during searches
	users int // searches running
}

// NarrowProcessors runs the process on one processor outside searches,
// unless the environment sets GOMAXPROCS.
func NarrowProcessors(getenv func(string) string) {
	if getenv("GOMAXPROCS") != "" {
		return
	}
	procs.mu.Lock()
	defer procs.mu.Unlock()
	if procs.base == 0 {
		procs.wide = runtime.GOMAXPROCS(1)
		procs.base = 1
	}
}

// widen gives a search every processor until the returned function is
// called.
func widen() (done func()) {
	procs.mu.Lock()
	defer procs.mu.Unlock()
	if procs.base == 0 || procs.wide <= procs.base {
		return func() {}
	}
	if procs.users == 0 {
		runtime.GOMAXPROCS(procs.wide)
	}
	procs.users++
	return func() {
		procs.mu.Lock()
		defer procs.mu.Unlock()
		if procs.users--; procs.users == 0 {
			runtime.GOMAXPROCS(procs.base)
		}
	}
}
