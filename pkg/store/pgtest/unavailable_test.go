package pgtest

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// outcome records how a test ended: a fake testing.TB whose Fatalf and
// Skipf end the goroutine as the real ones do.
type outcome struct {
	testing.TB
	fatal, skip string
}

func (o *outcome) Fatalf(format string, args ...any) {
	o.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (o *outcome) Skipf(format string, args ...any) {
	o.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (o *outcome) Cleanup(func()) {}

// end runs f with an outcome and returns it once f ended.
func end(t *testing.T, f func(tb testing.TB)) *outcome {
	o := &outcome{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(o)
	}()
	<-done
	return o
}

// TestUnavailableFailsUnderCI: a test that cannot have its server fails
// under CI=true, and is skipped, saying why, elsewhere; so does Start when
// the server's programs are missing.
func TestUnavailableFailsUnderCI(t *testing.T) {
	cause := errors.New("initdb not found")
	for _, tc := range []struct {
		ci         string
		fail, skip bool
	}{
		{"true", true, false},
		{"", false, true},
		{"false", false, true},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv("POWERGLIDE_PG_BIN", t.TempDir()) // no initdb there
			for name, f := range map[string]func(tb testing.TB){
				"Unavailable": func(tb testing.TB) { Unavailable(tb, cause) },
				"Start":       func(tb testing.TB) { Start(tb, Options{}) },
			} {
				o := end(t, f)
				if (o.fatal != "") != tc.fail || (o.skip != "") != tc.skip {
					t.Errorf("%s under CI=%q: failed %q, skipped %q", name, tc.ci, o.fatal, o.skip)
				}
				if msg := o.fatal + o.skip; !strings.Contains(msg, "initdb") {
					t.Errorf("%s: %q does not say why", name, msg)
				}
			}
		})
	}
}
