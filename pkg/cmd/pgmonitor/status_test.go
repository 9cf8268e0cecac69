package pgmonitor_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/cmd/pgmonitor"
	"github.com/powerglide/powerglide/pkg/monitor"
	"github.com/powerglide/powerglide/pkg/store/filestore"
)

// On a terminal, status prints a table; --json forces JSON Lines.
func TestStatusTable(t *testing.T) {
	home := t.TempDir()
	tm, err := filestore.Open(home, filestore.Options{}).Team("t")
	if err != nil {
		t.Fatal(err)
	}
	task := "t-7"
	if _, err := monitor.Beat(context.Background(), tm, monitor.BeatOptions{Worker: "7", PID: os.Getpid(), Home: home, Task: &task}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		var out, errb bytes.Buffer
		io := cli.Test(nil, &out, &errb, "POWERGLIDE_HOME="+home, "HOME="+home)
		io.OutTTY = true
		if code := cli.Run(context.Background(), pgmonitor.Spec(), args, io); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	table := run("status", "--team", "t")
	for _, want := range []string{"WORKER", "LIVENESS", "7", "alive", "t-7"} {
		if !strings.Contains(table, want) {
			t.Fatalf("table lacks %q:\n%s", want, table)
		}
	}
	if js := run("status", "--team", "t", "--json"); !strings.HasPrefix(js, `{"type":"worker_status","worker":"7","liveness":"alive"`) {
		t.Fatalf("--json: %s", js)
	}
}
