package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdDescendants: descendants PIDFILE OUT NAME... writes the live
// descendants of the pid in PIDFILE to OUT (one "pid start comm" a line),
// and fails unless a process of each NAME is among them within 10 s.
func cmdDescendants(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: descendants PIDFILE OUT NAME...")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(ts.ReadFile(args[0])))
	ts.Check(err)
	// The names are waited for: a process the script knows to be under way
	// may not have forked its child yet (bash between "touch started" and
	// "sleep").
	deadline := time.Now().Add(10 * time.Second)
	for {
		tree, missing := descendantsOf(ts, pid, args[2:])
		if len(missing) == 0 || time.Now().After(deadline) {
			ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(tree), 0o644))
			if len(missing) > 0 {
				ts.Fatalf("no %s among the descendants of %d:\n%s", strings.Join(missing, ", "), pid, tree)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// descendantsOf lists pid's descendants, a line "PID START COMM" each, and
// which of names none of them has.
func descendantsOf(ts *testscript.TestScript, pid int, names []string) (tree string, missing []string) {
	children := map[int][]proc.Stat{}
	ts.Check(proc.Scan(func(s proc.Stat) { children[s.PPID] = append(children[s.PPID], s) }))
	var b strings.Builder
	seen := map[string]bool{}
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			fmt.Fprintf(&b, "%d %s %s\n", c.PID, c.Start, c.Comm)
			seen[c.Comm] = true
			walk(c.PID)
		}
	}
	walk(pid)
	for _, name := range names {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	return b.String(), missing
}

// cmdGone: gone FILE [NAME...] waits up to 10 s for every process listed
// in FILE (as descendants writes it), or those named NAME, to end, and
// fails naming those left.
func cmdGone(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: gone FILE [NAME...]")
	}
	names := map[string]bool{}
	for _, n := range args[1:] {
		names[n] = true
	}
	lines := strings.Split(strings.TrimSpace(ts.ReadFile(args[0])), "\n")
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) < 3 || (len(names) > 0 && !names[f[2]]) {
				continue
			}
			pid, _ := strconv.Atoi(f[0])
			if proc.Matches(pid, f[1]) {
				left = append(left, l)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("still running 10s later:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
