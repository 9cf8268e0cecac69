package pgmonitor_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
)

// The testscript archives carry copies of the queue double and the script
// worker; they must stay the same as testdata/monitor's.
func TestScriptCopies(t *testing.T) {
	scripts, _ := filepath.Glob(filepath.Join("..", "..", "..", "testdata", "script", "pg-monitor", "*.txtar"))
	if len(scripts) == 0 {
		t.Fatal("no pg-monitor scripts found")
	}
	for _, s := range scripts {
		a, err := txtar.ParseFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range a.Files {
			if f.Name != "fake-pg-queue" && f.Name != "worker.sh" {
				continue
			}
			want, err := os.ReadFile(filepath.Join(testdata, f.Name))
			if err != nil {
				t.Fatal(err)
			}
			if string(f.Data) != string(want) {
				t.Errorf("%s: the copy of %s differs from testdata/monitor/%s", s, f.Name, f.Name)
			}
		}
	}
}
