//go:build pgqueue_crashtest

package pgqueue

import (
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
)

// crashHook, built only into the binary of the crash tests (go build -tags
// pgqueue_crashtest): with PGQUEUE_TEST_CRASH=P, a change kills its own
// process with probability P at each point between the files it touches,
// a window of microseconds that random kills from outside hit too rarely.
func crashHook() func(string) bool {
	p, err := strconv.ParseFloat(os.Getenv("PGQUEUE_TEST_CRASH"), 64)
	if err != nil {
		return nil
	}
	return func(string) bool {
		if rand.Float64() < p {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return false
	}
}
