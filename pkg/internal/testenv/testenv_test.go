package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// fakeT records what Need does to a test.
type fakeT struct {
	testing.TB
	skipped, failed string
}

func (f *fakeT) Helper()                   {}
func (f *fakeT) Skip(args ...any)          { f.skipped = fmt.Sprint(args...) }
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
