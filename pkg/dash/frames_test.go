package dash

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// The fixed clock of the fixtures: every age on screen is relative to it.
var fixtureNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

const fixtureHost = "fixture-host"

// fixtureDir copies testdata/dash/home into a temporary data root, so a
// test may change the team's files.
func fixtureDir(t testing.TB) teamdir.Dir { t.Helper(); return fixtureTeam(t, "demo") }

// fixtureTeam is fixtureDir for another team of testdata/dash/home.
func fixtureTeam(t testing.TB, team string) teamdir.Dir {
	t.Helper()
	home := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "dash", "home")
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(home, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := teamdir.New(home, team)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// frameModel runs a dashboard in a real tea.Program and keeps the last
// frame it drew, for the test to wait on and compare.
type frameModel struct {
	m     *Model
	mu    *sync.Mutex
	frame *string
}

func (f frameModel) Init() tea.Cmd { return f.m.Init() }

func (f frameModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := f.m.Update(msg)
	return f, cmd
}

func (f frameModel) View() tea.View {
	v := f.m.View()
	f.mu.Lock()
	*f.frame = v.Content
	f.mu.Unlock()
	return v
}

type harness struct {
	t  *testing.T
	tm *teatest.TestModel
	fm frameModel
}

// startHarness runs a dashboard at a fixed size with the fixed clock and a
// forced colour profile.
func startHarness(t *testing.T, opt Options, w, h int) *harness {
	t.Helper()
	if opt.Now == nil {
		opt.Now = func() time.Time { return fixtureNow }
	}
	if opt.Host == (proc.Host{}) {
		opt.Host = proc.Host{Name: fixtureHost}
	}
	if opt.Alive == nil {
		// The fixture's pids are made up: 40001-40004 are "running".
		opt.Alive = func(pid int, start string) bool { return pid >= 40001 && pid <= 40004 && start == "123456" }
	}
	var s string
	fm := frameModel{m: New(opt), mu: &sync.Mutex{}, frame: &s}
	tm := teatest.NewTestModel(t, fm,
		teatest.WithInitialTermSize(w, h),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.ANSI)),
	)
	hs := &harness{t: t, tm: tm, fm: fm}
	t.Cleanup(func() {
		_ = tm.Quit()
		tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
		fm.m.Close()
	})
	return hs
}

func (h *harness) frame() string {
	h.fm.mu.Lock()
	defer h.fm.mu.Unlock()
	return *h.fm.frame
}

// waitFor waits until the plain frame contains every marker and has not
// changed for a moment, and returns it (with its colours).
func (h *harness) waitFor(markers ...string) string {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	stable := 0
	for time.Now().Before(deadline) {
		f := h.frame()
		plain := ansi.Strip(f)
		ok := true
		for _, m := range markers {
			ok = ok && strings.Contains(plain, m)
		}
		if ok && f == last {
			stable++
			if stable >= 3 {
				return f
			}
		} else {
			stable = 0
		}
		last = f
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("frame never showed %q; last frame:\n%s", markers, ansi.Strip(last))
	return ""
}

func (h *harness) keys(keys ...string) {
	for _, k := range keys {
		h.tm.Send(keyMsg(k))
	}
}

// keyMsg builds a key press from a name ("enter", "tab", "esc", "up",
// "down", "pgup") or a character.
func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "shift+tab":
		return tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "pgup":
		return tea.KeyPressMsg{Code: tea.KeyPgUp}
	}
	r := []rune(k)[0]
	return tea.KeyPressMsg{Code: r, Text: k}
}

// goldenFrame compares a frame, without colours, to
// testdata/dash/golden/<name>.txt; go test -update rewrites it (the flag
// is the golden package's, registered through teatest).
func goldenFrame(t *testing.T, name, frame string) {
	t.Helper()
	plain := ansi.Strip(frame)
	// Trailing spaces are padding, not part of the design.
	lines := strings.Split(plain, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	plain = strings.Join(lines, "\n") + "\n"
	path := filepath.Join("..", "..", "testdata", "dash", "golden", name+".txt")
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(plain), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if string(want) != plain {
		t.Errorf("frame %s differs from %s (go test -update rewrites it)\n--- want\n%s--- got\n%s", name, path, want, plain)
	}
}

// TestFrames drives every view in a real program at 80x24 and 160x48 and
// compares the frames with golden files.
func TestFrames(t *testing.T) {
	cases := []struct {
		name    string
		opt     func(*Options)
		steps   [][]string // keys to send; a single long string is a marker to wait for
		markers []string
	}{
		{name: "overview", markers: []string{"retry-after", "worker 3 pause"}},
		{name: "worker", steps: [][]string{{"enter"}}, markers: []string{"one more check", "worker 1"}},
		{name: "worker-scrolled", steps: [][]string{{"enter"}, {"one more check"}, {"pgup"}}, markers: []string{"lines (G to follow)"}},
		{name: "worker-stale", steps: [][]string{{"down", "down", "down", "enter"}}, markers: []string{"worker 4", "stale", "does not exist yet"}},
		{name: "tasks", steps: [][]string{{"tab", "tab"}}, markers: []string{"tasks · 12 of 12"}},
		{name: "tasks-filter", steps: [][]string{{"tab", "tab", "/", "f", "a", "i", "l", "e", "d", "enter"}}, markers: []string{"tasks · 1 of 12 · filter failed"}},
		{name: "task-detail", steps: [][]string{{"tab", "tab", "/", "d", "o", "n", "e", "enter"}, {"tasks · 2 of 12"}, {"down", "enter"}}, markers: []string{"task t-02", "README: exit code table"}},
		{name: "task-failed", steps: [][]string{{"tab", "tab", "/", "f", "a", "i", "l", "enter"}, {"filter fail"}, {"enter"}}, markers: []string{"task t-07", "want 2"}},
		{name: "stop-ended", steps: [][]string{{"x"}}, markers: []string{"process 40001 has ended"}},
		{name: "help", steps: [][]string{{"?"}}, markers: []string{"page up"}},
		{name: "stream", opt: func(o *Options) {
			f, err := os.Open(filepath.Join("..", "..", "testdata", "dash", "loop-stream.jsonl"))
			if err != nil {
				panic(err)
			}
			o.Stream = f
		}, markers: []string{"POWERGLIDE_DONE", "(ended)"}},
	}
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		for _, tc := range cases {
			name := fmt.Sprintf("%s-%dx%d", tc.name, size[0], size[1])
			t.Run(name, func(t *testing.T) {
				opt := Options{Dir: fixtureDir(t)}
				if tc.opt != nil {
					tc.opt(&opt)
				}
				h := startHarness(t, opt, size[0], size[1])
				if opt.Stream == nil {
					h.waitFor("retry-after", "worker 3 pause") // the team is loaded
				}
				for _, s := range tc.steps {
					if len(s) == 1 && len(s[0]) > 5 && s[0] != "shift+tab" {
						h.waitFor(s[0]) // a marker, not a key
						continue
					}
					h.keys(s...)
				}
				f := h.waitFor(tc.markers...)
				goldenFrame(t, name, f)
				for i, l := range strings.Split(f, "\n") {
					if w := ansi.StringWidth(l); w > size[0] {
						t.Errorf("line %d is %d columns wide, more than %d: %q", i+1, w, size[0], ansi.Strip(l))
					}
				}
				if n := strings.Count(f, "\n") + 1; n != size[1] {
					t.Errorf("frame has %d lines, want %d", n, size[1])
				}
			})
		}
	}
}

// TestStaleIsRed checks the colour of heartbeats: worker 4's last beat is
// 95 s old, past the 30 s default, and red; worker 1's is 3 s old, green.
func TestStaleIsRed(t *testing.T) {
	h := startHarness(t, Options{Dir: fixtureDir(t)}, 120, 30)
	f := h.waitFor("retry-after")
	red := regexp.MustCompile(`\x1b\[[0-9;]*31m\s*1m35s`)
	if !red.MatchString(f) {
		t.Errorf("stale heartbeat 1m35s is not red in:\n%q", f)
	}
	green := regexp.MustCompile(`\x1b\[[0-9;]*32m\s*3s`)
	if !green.MatchString(f) {
		t.Errorf("fresh heartbeat 3s is not green in:\n%q", f)
	}
}

// TestArchivedFrames: the long team's queue had 600 finished tasks archived
// by pg-queue and its workers were restarted; the header counts the
// archived tasks (done, total, progress, ETA) and the earlier processes'
// cost (spent), and the workers table shows each worker's total.
func TestArchivedFrames(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		name := fmt.Sprintf("overview-archived-%dx%d", size[0], size[1])
		t.Run(name, func(t *testing.T) {
			h := startHarness(t, Options{Dir: fixtureTeam(t, "long")}, size[0], size[1])
			f := h.waitFor("600 archived", "602 done", "$12.9", "ETA 5m58s", "1 blocked")
			goldenFrame(t, name, f)
		})
	}
}

// TestStateColours checks the colours of the workers table, which the
// golden frames (compared without escape codes) cannot: each state cell is
// painted in its state's colour, executing, thinking, done and failed all
// differ, and a stale heartbeat differs from a fresh one.
func TestStateColours(t *testing.T) {
	h := startHarness(t, Options{Dir: fixtureDir(t)}, 120, 30)
	f := h.waitFor("retry-after")
	// The escape sequences right before a cell's text.
	sgr := func(text string) string {
		t.Helper()
		m := regexp.MustCompile(`((?:\x1b\[[0-9;]*m)+)\s*` + regexp.QuoteMeta(text)).FindStringSubmatch(f)
		if m == nil {
			t.Fatalf("no coloured cell %q in:\n%q", text, f)
		}
		return m[1]
	}
	want := map[string]string{ // state → SGR colour parameter
		"executing": "33", "thinking": "35", "done": "32", "failed": "31",
	}
	seen := map[string]string{}
	for state, colour := range want {
		// The state cell is the one after the worker id: "1  executing".
		got := sgr(state + " ")
		if !regexp.MustCompile(`[\[;]` + colour + `[;m]`).MatchString(got) {
			t.Errorf("state %s painted %q, want colour %s", state, got, colour)
		}
		for other, s := range seen {
			if s == got {
				t.Errorf("states %s and %s have the same colour %q", state, other, got)
			}
		}
		seen[state] = got
	}
	if stale, fresh := sgr("1m35s\x1b"), sgr(" 3s\x1b"); stale == fresh {
		t.Errorf("a stale heartbeat has the colour of a fresh one: %q", stale)
	}
}
