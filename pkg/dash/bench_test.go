package dash

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// bigTeam writes a team of n workers and 4n tasks.
func bigTeam(b *testing.B, n int) teamdir.Dir {
	b.Helper()
	d, _ := teamdir.New(b.TempDir(), "big")
	if err := d.Ensure(); err != nil {
		b.Fatal(err)
	}
	var tasks []protocol.Task
	for i := 0; i < 4*n; i++ {
		st := []string{"pending", "claimed", "done", "failed"}[i%4]
		tasks = append(tasks, protocol.Task{ID: fmt.Sprintf("t-%03d", i), Title: fmt.Sprintf("task number %d with a longish title", i), Status: st, DependsOn: []string{}})
	}
	q, _ := json.Marshal(map[string]any{"tasks": tasks})
	if err := writeFile(d.Queue(), q); err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		w := &protocol.Worker{Worker: fmt.Sprint(i), State: []string{"thinking", "executing", "observing", "verify"}[i%4],
			Task: fmt.Sprintf("t-%03d", 4*(i-1)+1), Step: i, HeartbeatAt: fixtureNow.Add(-time.Duration(i) * time.Second),
			Usage: protocol.Usage{InputTokens: 1000 * i, OutputTokens: 100 * i, CostUSD: 0.01 * float64(i)}, Velocity: 1}
		if err := d.WriteWorker(w); err != nil {
			b.Fatal(err)
		}
	}
	return d
}

// logLine is a realistic loop event, alternating types.
func logLine(i int) []byte {
	ts := fixtureNow.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)
	switch i % 4 {
	case 0:
		return fmt.Appendf(nil, `{"type":"tool_call","ts":%q,"step":%d,"call":{"id":"c%d","name":"bash","input":{"command":"go test ./pkg/... -run TestNumber%d"}}}`, ts, i, i, i)
	case 1:
		return fmt.Appendf(nil, `{"type":"tool_result","ts":%q,"step":%d,"result":{"type":"result","id":"c%d","name":"bash","ok":true,"output":"ok  pkg/a 0.1s\nok  pkg/b 0.2s\nok  pkg/c 0.3s","error":null,"truncated":false,"duration_ms":310}}`, ts, i, i)
	case 2:
		return fmt.Appendf(nil, `{"type":"assistant","ts":%q,"step":%d,"thinking":"The tests pass; next I check the edge case of an empty queue, which the issue mentions explicitly.","text":"Tests pass. Checking the empty queue next.","usage":{"input_tokens":1200,"output_tokens":80},"total":{"input_tokens":%d,"output_tokens":%d}}`, ts, i, 1200*i, 80*i)
	}
	return fmt.Appendf(nil, `{"type":"state","ts":%q,"step":%d,"from":"thinking","to":"tool_call"}`, ts, i)
}

func loadedModel(b *testing.B, d teamdir.Dir, w, h int, view string) *Model {
	b.Helper()
	m := New(Options{Dir: d, Now: func() time.Time { return fixtureNow }, View: view})
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	m.Update(loadedMsg{m.loader.Load(jsonl.Pos{}, fixtureNow), 1})
	m.logFor = m.selectedID()
	return m
}

// BenchmarkViewOverview64 is one frame of the overview of 64 workers
// (drawn anew: the dashboard reuses a frame while nothing changed).
func BenchmarkViewOverview64(b *testing.B) {
	d := bigTeam(b, 64)
	for _, size := range [][2]int{{80, 24}, {160, 48}, {250, 80}} {
		b.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(b *testing.B) {
			m := loadedModel(b, d, size[0], size[1], ViewOverview)
			b.ReportAllocs()
			for b.Loop() {
				m.frameOK = false // draw, not reuse the last frame
				_ = m.View()
			}
		})
	}
}

// BenchmarkFrameLogFlood is one frame of the worker view while 1,000 log
// lines a second arrive, drawn at 60 frames a second: each frame decodes
// and folds in 17 new lines, then draws. The log holds thousands of
// entries. ns/op is the frame time.
func BenchmarkFrameLogFlood(b *testing.B) {
	d := bigTeam(b, 64)
	for _, size := range [][2]int{{80, 24}, {160, 48}} {
		b.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(b *testing.B) {
			m := loadedModel(b, d, size[0], size[1], ViewWorker)
			i := 0
			feed := func(n int) tailMsg {
				msg := tailMsg{gen: m.logGen}
				for k := 0; k < n; k++ {
					e, err := DecodeEntry(logLine(i))
					if err != nil {
						b.Fatal(err)
					}
					msg.entries = append(msg.entries, e)
					i++
				}
				return msg
			}
			m.Update(feed(maxEntries)) // a full log
			m.View()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				m.Update(feed(17))
				_ = m.View()
			}
		})
	}
}

// BenchmarkLoad64 is one reread of a 64-worker team (done in a tea.Cmd,
// off the UI's path, at most five times a second).
func BenchmarkLoad64(b *testing.B) {
	d := bigTeam(b, 64)
	l := Loader{Dir: d}
	pos := jsonl.Pos{Path: d.Events()}
	b.ReportAllocs()
	for b.Loop() {
		r := l.Load(pos, fixtureNow)
		pos = r.Journal.Pos
	}
}

func writeFile(path string, b []byte) error { return atomicfile.WriteFile(path, b, 0o644) }
