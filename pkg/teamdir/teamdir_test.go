package teamdir

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

func TestNames(t *testing.T) {
	for _, ok := range []string{"a", "team-1", "T_2.x", "0"} {
		if err := ValidName("team", ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", ".hidden", "a/b", "a b", "-x", string(make([]byte, 200))} {
		if err := ValidName("team", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := New("/h", "../etc"); err == nil {
		t.Error("path escape accepted as a team name")
	}
}

func TestPaths(t *testing.T) {
	d, _ := New("/h", "t")
	want := map[string]string{
		d.Queue(): "/h/teams/t/task-queue.json", d.Events(): "/h/teams/t/events.jsonl", d.Lock(): "/h/teams/t/lock",
		d.Worker("3"): "/h/teams/t/worker-3.json", d.Log("3"): "/h/teams/t/logs/worker-3.jsonl", d.Velocity("3"): "/h/teams/t/worker-3.velocity",
	}
	for got, w := range want {
		if got != w {
			t.Errorf("%s, want %s", got, w)
		}
	}
}

func TestWorkers(t *testing.T) {
	d, _ := New(t.TempDir(), "t")
	if err := d.Ensure(); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, n := range []string{"10", "2", "1"} {
		if err := d.WriteWorker(&protocol.Worker{Worker: n, State: "idle", HeartbeatAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(d.Path(), "worker-bad.json"), []byte("{"), 0o644)
	ws, errs := d.Workers()
	if len(ws) != 3 || ws[0].Worker != "1" || ws[1].Worker != "2" || ws[2].Worker != "10" || len(errs) != 1 {
		t.Fatalf("workers %v errs %v", ws, errs)
	}
	if w, err := d.ReadWorker("2"); err != nil || !w.HeartbeatAt.Equal(now) {
		t.Fatalf("%v %v", w, err)
	}
	if err := d.WriteWorker(&protocol.Worker{Worker: "../x"}); err == nil {
		t.Fatal("bad worker name accepted")
	}
}
