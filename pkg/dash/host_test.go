package dash

import (
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// The dashboard checks a pid exactly where pg-monitor would (proc.Host.Owns):
// a record with this host's id, or without an id under this host's name;
// never one with another host's id, even under this host's name and with
// the pid and start time of a live process here.
func TestLoadChecksOnlyThisHostsPids(t *testing.T) {
	here := proc.ThisHost()
	if here.ID == "" {
		t.Fatal("this host has no id: /proc/sys/kernel/random/boot_id or /proc/self/ns/pid unreadable")
	}
	pid, start, err := proc.Self()
	if err != nil {
		t.Fatal(err)
	}
	other := proc.HostID("another boot", "pid:[4026531836]")
	for _, tc := range []struct {
		name, host, id string
		want           int
	}{
		{"this host", here.Name, here.ID, AliveYes},
		{"an old record of this host", here.Name, "", AliveYes},
		{"another host of the same name", here.Name, other, AliveUnknown},
		{"another host", "elsewhere", "", AliveUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := teamdir.Dir{Home: t.TempDir(), Team: "t"}
			if err := d.Ensure(); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			if err := d.WriteWorker(&protocol.Worker{Worker: "1", PID: pid, PIDStart: start, Host: tc.host, HostID: tc.id,
				State: "executing", HeartbeatAt: now, Velocity: 1}); err != nil {
				t.Fatal(err)
			}
			s := Loader{Dir: d, Host: here}.Load(jsonl.Pos{}, now).Snap
			if len(s.Workers) != 1 || s.Workers[0].Alive != tc.want {
				t.Fatalf("workers %+v, want alive=%d", s.Workers, tc.want)
			}
		})
	}
}
