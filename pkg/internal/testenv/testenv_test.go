package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// fakeT records what Need and Unavailable do to a test.
type fakeT struct {
	testing.TB
	skipped, failed string
}

func (f *fakeT) Helper()                   {}
func (f *fakeT) Skip(args ...any)          { f.skipped = fmt.Sprint(args...) }
func (f *fakeT) Skipf(s string, a ...any)  { f.skipped = fmt.Sprintf(s, a...) }
func (f *fakeT) Fatalf(s string, a ...any) { f.failed = fmt.Sprintf(s, a...) }

func TestNeedFailsUnderCI(t *testing.T) {
	const missing = "pg-no-such-program-on-path"
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		f := &fakeT{TB: t}
		Need(f, "install it", "sh", missing)
		if ci == "true" && (f.failed == "" || !strings.Contains(f.failed, missing)) {
			t.Errorf("CI=true: a missing program did not fail the test (skipped %q)", f.skipped)
		}
		if ci == "" && (f.skipped == "" || f.failed != "") {
			t.Errorf("outside CI: want a skip, got skip %q fail %q", f.skipped, f.failed)
		}
	}
	f := &fakeT{TB: t}
	Need(f, "", "sh")
	if f.skipped != "" || f.failed != "" {
		t.Errorf("sh is installed: skip %q fail %q", f.skipped, f.failed)
	}
}

func TestUnavailableFailsUnderCI(t *testing.T) {
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		f := &fakeT{TB: t}
		Unavailable(f, "no PID namespace", fmt.Errorf("operation not permitted"))
		if ci == "true" && (f.failed == "" || f.skipped != "" || !strings.Contains(f.failed, "no PID namespace")) {
			t.Errorf("CI=true: want a failure, got skip %q fail %q", f.skipped, f.failed)
		}
		if ci == "" && (f.skipped == "" || f.failed != "") {
			t.Errorf("outside CI: want a skip, got skip %q fail %q", f.skipped, f.failed)
		}
	}
}
