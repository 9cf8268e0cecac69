package dash

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// onTwoHosts moves workers 4 to 6 of the fixture team to another host: a
// team across machines, on a PostgreSQL store.
func onTwoHosts(t *testing.T, d teamdir.Dir) {
	t.Helper()
	for _, n := range []string{"4", "5", "6"} {
		w, err := d.ReadWorker(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Host = "b.example"
		if err := d.WriteWorker(w); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTwoHostFrames: a team whose workers run on two hosts has a HOST
// column, the first to go when the terminal is too narrow for all; the
// fixture team, on one host, has none (the overview golden frames).
func TestTwoHostFrames(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		name := fmt.Sprintf("overview-two-hosts-%dx%d", size[0], size[1])
		t.Run(name, func(t *testing.T) {
			d := fixtureDir(t)
			onTwoHosts(t, d)
			h := startHarness(t, Options{Dir: d}, size[0], size[1])
			f := h.waitFor("retry-after", "worker 3 pause")
			goldenFrame(t, name, f)
			if p := ansi.Strip(f); !strings.Contains(p, "  ID HOST         STATE ") || !strings.Contains(p, "  4  b.example    tool_call ") {
				t.Errorf("%dx%d: no HOST column", size[0], size[1])
			}
		})
	}
	// Narrower, HOST goes first: VEL, next in line, stays.
	d := fixtureDir(t)
	onTwoHosts(t, d)
	snap := Loader{Dir: d}.Load(jsonl.Pos{}, fixtureNow).Snap
	table := WorkersTable{Workers: snap.Workers, Snap: &snap, Now: fixtureNow, Stale: 30 * time.Second}
	for width, wantHost := range map[int]bool{80: true, 75: false} {
		hdr := strings.SplitN(ansi.Strip(table.Render(width, 10)), "\n", 2)[0]
		if strings.Contains(hdr, "HOST") != wantHost || !strings.Contains(hdr, "VEL") {
			t.Errorf("width %d: header %q, want HOST: %v, and VEL", width, hdr, wantHost)
		}
	}
}

// TestOnceTextHosts: pg-dash --once shows each worker's host when the
// team runs on more than one, and the same table as ever on one.
func TestOnceTextHosts(t *testing.T) {
	text := func(d teamdir.Dir) string {
		r := Loader{Dir: d}.Load(jsonl.Pos{}, fixtureNow)
		var b strings.Builder
		if err := WriteText(&b, Record(&r.Snap, fixtureNow, 30*time.Second, nil)); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	d := fixtureDir(t)
	one := text(d)
	if !strings.Contains(one, "\nWORKER  STATE ") || strings.Contains(one, "HOST") {
		t.Errorf("one host, the table has a HOST column:\n%s", one)
	}
	onTwoHosts(t, d)
	two := text(d)
	for _, want := range []string{"\nWORKER  HOST          STATE ", "\n1       fixture-host  executing ", "\n4       b.example     tool_call "} {
		if !strings.Contains(two, want) {
			t.Errorf("two hosts: no %q in\n%s", want, two)
		}
	}
}

// TestOnceTextOneLinePerWorker: what a record says stays in its own cells
// of its own row in pg-dash --once: a newline in a state or a task id
// prints no row of its making, a host name is cut and its bidirectional
// controls shown.
func TestOnceTextOneLinePerWorker(t *testing.T) {
	d := fixtureDir(t)
	onTwoHosts(t, d)
	w, err := d.ReadWorker("4")
	if err != nil {
		t.Fatal(err)
	}
	w.State = "executing\n2        done  t-FAKE  99"
	w.Task = "t-x\nFORGED ROW"
	w.Host = "boxB\u202eevil" + strings.Repeat("h", 200)
	if err := d.WriteWorker(w); err != nil {
		t.Fatal(err)
	}
	r := Loader{Dir: d}.Load(jsonl.Pos{}, fixtureNow)
	var b strings.Builder
	if err := WriteText(&b, Record(&r.Snap, fixtureNow, 30*time.Second, nil)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "2        done") || strings.HasPrefix(line, "FORGED ROW") {
			t.Errorf("a record's newline made a row: %q in\n%s", line, out)
		}
		if len(line) > 200 {
			t.Errorf("a host name widened a row to %d bytes: %q", len(line), line)
		}
	}
	if strings.Contains(out, "\u202e") || !strings.Contains(out, `boxB\u202eevil`) {
		t.Errorf("the right-to-left override is not shown visibly:\n%s", out)
	}
}

// TestStatusLineShowsControlsVisibly: the status line may quote a worker
// name from a record; its escape sequences reach the terminal as text.
func TestStatusLineShowsControlsVisibly(t *testing.T) {
	var m Model
	m.setStatus("worker 1\x1b[5m has no pid recorded: nothing to stop", "warn")
	if strings.Contains(m.status, "\x1b") || !strings.Contains(m.status, "1^[[5m has") {
		t.Errorf("status %q", m.status)
	}
}
