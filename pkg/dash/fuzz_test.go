package dash

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/powerglide/powerglide/pkg/jsonl"
)

func FuzzDecodeQueue(f *testing.F) {
	b, _ := os.ReadFile(filepath.Join("..", "..", "testdata", "dash", "home", "teams", "demo", "task-queue.json"))
	f.Add(b)
	f.Add([]byte(`[{"id":"a","status":"pending","depends_on":["b"]}]`))
	f.Add([]byte(`{"tasks":null}`))
	f.Add([]byte(`{"archived":{"done":600,"failed":-1},"finished_deps":{"x":"failed"},"tasks":[{"id":"a","status":"pending","depends_on":["x"]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, err := DecodeQueue(b)
		if err != nil {
			return
		}
		markBlocked(doc.Tasks, doc.FinishedDeps)
		c := CountTasks(doc.Tasks).AddArchived(doc.Archived)
		if c.Total != len(doc.Tasks)+c.Archived {
			t.Fatalf("total %d of %d tasks and %d archived", c.Total, len(doc.Tasks), c.Archived)
		}
	})
}

func FuzzDecodeEntry(f *testing.F) {
	b, _ := os.ReadFile(filepath.Join("..", "..", "testdata", "dash", "loop-stream.jsonl"))
	for _, l := range splitLines(b) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := DecodeEntry(line)
		if err != nil {
			return
		}
		for _, w := range []int{1, 10, 80} {
			for _, l := range e.render(w) {
				if width(l) > w && w >= 20 {
					t.Fatalf("line wider than %d: %q", w, l)
				}
			}
		}
		st := NewStreamState()
		st.Apply(e)
		_ = st.Snapshot()
	})
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, b[start:i])
			start = i + 1
		}
	}
	return out
}

// TestNarrowSizes draws every view at small and odd sizes: no line may be
// wider than the terminal, and the frame fills its height exactly.
func TestNarrowSizes(t *testing.T) {
	d := fixtureDir(t)
	now := func() time.Time { return fixtureNow }
	r := Loader{Dir: d}.Load(jsonl.Pos{}, fixtureNow)
	tail := readLog(jsonl.Pos{Path: d.Log("1")}, 0, fixtureNow)
	for _, view := range []string{ViewOverview, ViewWorker, ViewTasks, "detail", "help"} {
		for _, size := range [][2]int{{20, 5}, {30, 8}, {45, 12}, {60, 15}, {79, 23}, {81, 25}, {300, 100}} {
			m := New(Options{Dir: d, Now: now})
			m.Update(windowSize(size[0], size[1]))
			m.Update(loadedMsg{r, 1})
			m.logFor = "1"
			tail.gen = m.logGen
			m.Update(tail)
			switch view {
			case "detail":
				m.view, m.detail = ViewTasks, true
			case "help":
				m.help.ShowAll = true
			default:
				m.view = view
			}
			frame := m.Render()
			lines := splitLines([]byte(frame + "\n"))
			if len(lines) != max(size[1], 5) {
				t.Errorf("%s %dx%d: %d lines", view, size[0], size[1], len(lines))
			}
			for i, l := range lines {
				if w := width(string(l)); w > max(size[0], 20) {
					t.Errorf("%s %dx%d: line %d is %d wide: %q", view, size[0], size[1], i, w, l)
				}
			}
		}
	}
}

func windowSize(w, h int) tea.WindowSizeMsg { return tea.WindowSizeMsg{Width: w, Height: h} }
