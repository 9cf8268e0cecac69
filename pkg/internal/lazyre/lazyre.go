// Package lazyre holds regular expressions compiled on first use.
//
// A package-level regexp.MustCompile runs in package init, in every
// process that links the package, used or not: the tools' regular
// expressions compiled at init were about 3% of a pg-loop start (perf, 200
// starts). Compile defers that to the first call.
package lazyre

import (
	"regexp"
	"sync"
)

// Compile returns a function that compiles expr on its first call and
// returns the same *regexp.Regexp on every call; it panics, as
// regexp.MustCompile does, if expr is not a valid expression.
func Compile(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
