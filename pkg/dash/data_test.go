package dash

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
)

func TestDecodeQueue(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []string // ids
		err       string
	}{
		{"array", `[{"id":"a","status":"pending"},{"id":"b","status":"done"}]`, []string{"a", "b"}, ""},
		{"object", `{"version":1,"tasks":[{"id":"a","status":"pending"}]}`, []string{"a"}, ""},
		{"empty file", "  \n", nil, ""},
		{"empty array", `[]`, nil, ""},
		{"object without tasks", `{"version":1}`, nil, `no "tasks" array`},
		{"garbage", `hello`, nil, "neither an array"},
		{"torn", `[{"id":"a"`, nil, "task list"},
		{"wrong field type", `{"tasks":[{"id":1}]}`, nil, "queue document"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc, err := DecodeQueue([]byte(c.doc))
			tasks := doc.Tasks
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, k := range tasks {
				ids = append(ids, k.ID)
			}
			if strings.Join(ids, ",") != strings.Join(c.want, ",") {
				t.Fatalf("ids = %v, want %v", ids, c.want)
			}
		})
	}
}

func TestCountsAndBlocked(t *testing.T) {
	tasks := []protocol.Task{
		{ID: "a", Status: "done"},
		{ID: "b", Status: "pending", DependsOn: []string{"a"}},        // ready
		{ID: "c", Status: "pending", DependsOn: []string{"b"}},        // blocked
		{ID: "d", Status: "pending", DependsOn: []string{"archived"}}, // missing dep: taken as done
		{ID: "e", Status: "claimed"},
		{ID: "f", Status: "failed"},
		{ID: "g", Status: "cancelled"},
	}
	markBlocked(tasks, nil)
	c := CountTasks(tasks)
	want := Counts{Total: 7, Pending: 2, Blocked: 1, Claimed: 1, Done: 1, Failed: 1, Cancelled: 1}
	if c != want {
		t.Fatalf("counts = %+v, want %+v", c, want)
	}
	if c.Remaining() != 4 || c.Finished() != 3 {
		t.Fatalf("remaining %d finished %d", c.Remaining(), c.Finished())
	}
}

// TestArchivedQueue reads a queue written by pg-queue after it archived
// finished tasks: the archived counts are in the totals, and finished_deps
// decides whether a dependency that left the live file blocks a task.
func TestArchivedQueue(t *testing.T) {
	doc, err := DecodeQueue([]byte(`{"type":"task-queue","version":1,"archived":{"done":600,"failed":3,"cancelled":1},` +
		`"finished_deps":{"old-ok":"done","old-bad":"failed"},"tasks":[
{"id":"a","status":"done"},
{"id":"b","status":"pending","depends_on":["old-ok"]},
{"id":"c","status":"pending","depends_on":["old-bad"]},
{"id":"d","status":"pending","depends_on":["forgotten"]},
{"id":"e","status":"claimed"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	markBlocked(doc.Tasks, doc.FinishedDeps)
	got := map[string]string{}
	for _, k := range doc.Tasks {
		got[k.ID] = StatusOf(k)
	}
	// pg-queue never claims a task whose dependency is unknown to it.
	if got["b"] != "pending" || got["c"] != "blocked" || got["d"] != "blocked" {
		t.Fatalf("statuses = %v, want b pending, c and d blocked", got)
	}
	s := Snapshot{Tasks: doc.Tasks, Archived: doc.Archived}
	c := s.Counts()
	want := Counts{Total: 609, Pending: 1, Blocked: 2, Claimed: 1, Done: 601, Failed: 3, Cancelled: 1, Archived: 604}
	if c != want {
		t.Fatalf("counts = %+v, want %+v", c, want)
	}
	// 605 finished in 605 minutes: the 4 remaining take 4 more.
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s.Started = now.Add(-605 * time.Minute)
	if d, ok := s.ETA(now); !ok || d != 4*time.Minute {
		t.Fatalf("eta = %v %v, want 4m", d, ok)
	}
}

func TestETA(t *testing.T) {
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	s := Snapshot{Started: now.Add(-time.Hour), Tasks: []protocol.Task{{Status: "done"}, {Status: "pending"}, {Status: "pending"}}}
	if d, ok := s.ETA(now); !ok || d != 2*time.Hour {
		t.Fatalf("eta = %v %v, want 2h", d, ok)
	}
	s.Tasks = []protocol.Task{{Status: "pending"}}
	if _, ok := s.ETA(now); ok {
		t.Fatal("eta without a finished task")
	}
}

// Every loop event type, the signals and bad lines.
func TestDecodeEntry(t *testing.T) {
	cases := []struct {
		line, head, body, tone string
		err                    string
	}{
		{`{"type":"state","ts":"2026-01-01T00:00:00Z","step":3,"from":"thinking","to":"tool_call"}`, "── thinking → tool_call  step 3", "", "dim", ""},
		{`{"type":"state","step":3,"from":"verify","to":"failed","reason":"gave up"}`, "── verify → failed  step 3  (gave up)", "", "bad", ""},
		{`{"type":"assistant","step":2,"thinking":"hmm\nyes","text":"Done.","model":"m","usage":{"input_tokens":1200,"output_tokens":30},"total":{}}`, "◇ assistant  step 2  m  1.2k in / 30 out", "\x00thinkhmm|\x00thinkyes|Done.", "", ""},
		{`{"type":"tool_call","step":1,"call":{"id":"1","name":"bash","input":{"command":"ls -la"}}}`, "▶ bash command: ls -la", "", "warn", ""},
		{`{"type":"tool_call","step":1,"call":{"id":"1","name":"read","input":{"path":"a","limit":3}}}`, `▶ read {"path":"a","limit":3}`, "", "warn", ""},
		{`{"type":"tool_result","step":1,"result":{"type":"result","id":"1","name":"bash","ok":true,"output":"1\n2\n3\n4\n5\n6\n7\n8","duration_ms":1500}}`, "◀ bash ok 1.5s", "1|2|3|4|5|6|… 2 more lines", "ok", ""},
		{`{"type":"tool_result","step":1,"result":{"type":"result","id":"1","name":"edit","ok":false,"output":"","error":"old text not found","truncated":true}}`, "◀ edit failed", "old text not found|… output truncated", "bad", ""},
		{`{"type":"verify","step":4,"command":"go test ./...","ok":false,"exit_code":2,"output":"FAIL","attempt":1}`, "✘ verify failed (exit 2): go test ./...  attempt 1", "FAIL", "bad", ""},
		{`{"type":"verify","step":4,"command":"make","ok":true,"exit_code":0}`, "✔ verify passed: make", "", "ok", ""},
		{`{"type":"commit","hash":"0123456789abcdef","message":"fix it\n\nbody"}`, "● commit 0123456789 fix it …", "", "ok", ""},
		{`{"type":"commit","message":"x","skipped":true}`, "● commit skipped: nothing changed", "", "ok", ""},
		{`{"type":"limit","step":200,"limit":"steps","reason":"200 steps"}`, "■ limit steps: 200 steps", "", "bad", ""},
		{`{"type":"task","task":"t-1","title":"T","status":"failed","reason":"verify","usage":{}}`, "◆ task t-1 failed: T (verify)", "", "bad", ""},
		{`{"type":"log","level":"warn","message":"slow\nvery"}`, "· warn: slow …", "very", "warn", ""},
		{`{"type":"error","kind":"auth","message":"bad key"}`, "✘ error auth: bad key", "", "bad", ""},
		{`{"type":"summary","ok":false,"outcome":"limit","reason":"a limit stopped a task","tasks":{"done":2,"failed":1,"cancelled":0,"released":0},"steps":40,"usage":{"cost_usd":0.25},"wall_ms":61500,"model_ms":40000,"tools_ms":12000}`, "Σ limit: 2 done, 1 failed, 40 steps, $0.2500, 61.5s (model 40.0s, tools 12.0s)", "a limit stopped a task", "bad", ""},
		{`{"type":"summary","ok":true,"outcome":"done","tasks":{"done":1},"steps":3,"usage":{},"wall_ms":1000}`, "Σ done: 1 done, 0 failed, 3 steps, $0.0000, 1.0s (model 0.0s, tools 0.0s)", "", "ok", ""},
		{`{"type":"guard","step":3,"mode":"strict","action":"refused","kind":"url","tool":"bash","call_id":"c1","match":"https://evil.example/x","source":"mcp__web__fetch"}`, "⚠ guard refused url https://evil.example/x (from mcp__web__fetch)", "", "bad", ""},
		{`{"type":"guard","step":3,"mode":"warn","action":"warned","kind":"image","match":"https://evil.example/p.png","source":"lookup"}`, "⚠ guard warned image https://evil.example/p.png (from lookup)", "", "warn", ""},
		{`<POWERGLIDE_DONE>`, "■ <POWERGLIDE_DONE> every task ended", "", "ok", ""},
		{`<POWERGLIDE_ERROR>`, "■ <POWERGLIDE_ERROR> the loop failed", "", "bad", ""},
		{`not json`, "", "", "", "not a JSON object"},
		{`{"type":"nope"}`, "", "", "", `unknown loop-event record type "nope"`},
		{`{"step":1}`, "", "", "", `no "type" field`},
		{`{"type":"state","step":"x"}`, "", "", "", "loop-event record"},
	}
	for _, c := range cases {
		e, err := DecodeEntry([]byte(c.line))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err = %v, want %q", c.line, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.line, err)
			continue
		}
		if e.Head != c.head || strings.Join(e.Body, "|") != c.body || e.Tone != c.tone {
			t.Errorf("%s:\n head %q body %q tone %q\nwant %q body %q tone %q", c.line, e.Head, strings.Join(e.Body, "|"), e.Tone, c.head, c.body, c.tone)
		}
	}
}

func TestStreamState(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "testdata", "dash", "loop-stream.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	snap, es, info, err := ReadStream(f)
	if err != nil {
		t.Fatal(err)
	}
	w := snap.Workers[0]
	if w.Worker.Worker != "1" || w.State != "done" || w.Step != 17 || w.Task != "t-03" {
		t.Fatalf("worker = %+v", w.Worker)
	}
	if w.Usage.InputTokens != 12600 || w.Usage.CostUSD != 0.07 {
		t.Fatalf("usage = %+v", w.Usage)
	}
	if info.Record.Invalid != 2 || info.Record.Events != len(es) || info.Record.Ended != "done" {
		t.Fatalf("info = %+v", info)
	}
	c := snap.Counts()
	if c.Done != 1 || c.Claimed != 1 {
		t.Fatalf("counts = %+v", c)
	}
}

func TestLoadFixture(t *testing.T) {
	d := fixtureDir(t)
	r := Loader{Dir: d, Host: proc.Host{Name: "elsewhere"}}.Load(jsonl.Pos{}, fixtureNow)
	s := r.Snap
	if len(s.Workers) != 6 || len(s.Tasks) != 12 || !s.QueueExists {
		t.Fatalf("workers %d tasks %d", len(s.Workers), len(s.Tasks))
	}
	if v := s.Workers[1].Velocity(); v != 0.5 {
		t.Fatalf("worker 2 velocity %v, want the file's 0.5", v)
	}
	if !s.Workers[2].IsPaused() {
		t.Fatal("worker 3 is not paused")
	}
	if s.Workers[0].Alive != AliveUnknown {
		t.Fatal("a worker of another host was checked")
	}
	if len(r.JInvalid) != 1 || len(r.JLines) != 22 {
		t.Fatalf("journal: %d lines, %d invalid", len(r.JLines), len(r.JInvalid))
	}
	if r.First.IsZero() {
		t.Fatal("no first journal event")
	}
	// Broken files are problems, not failures.
	os.WriteFile(d.Queue(), []byte("{"), 0o644)
	os.WriteFile(d.Worker("9"), []byte("nope"), 0o644)
	os.WriteFile(d.Velocity("1"), []byte("fast"), 0o644)
	os.WriteFile(d.Velocity("2"), []byte("\n"), 0o644) // empty: no setting, as pg-loop leaves it
	r = Loader{Dir: d}.Load(r.Journal.Pos, fixtureNow)
	var probs []string
	for _, p := range r.Snap.Problems {
		probs = append(probs, p.File+": "+p.Msg)
	}
	got := strings.Join(probs, "\n")
	for _, want := range []string{"task-queue.json: queue document", "worker-9.json: invalid character", `worker-1.velocity: velocity "fast"`} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if len(r.Snap.Workers) != 6 {
		t.Errorf("good workers lost: %d", len(r.Snap.Workers))
	}
	if strings.Contains(got, "worker-2.velocity") || r.Snap.Workers[1].VelocityFile != nil {
		t.Errorf("an empty velocity file is a problem or a setting:\n%s", got)
	}
	// The team removed.
	os.RemoveAll(d.Path())
	r = Loader{Dir: d}.Load(r.Journal.Pos, fixtureNow)
	if r.Snap.DirExists || len(r.Snap.Problems) != 0 {
		t.Fatalf("missing team: %+v", r.Snap)
	}
}

func TestSnapshotJSON(t *testing.T) {
	d := fixtureDir(t)
	r := Loader{Dir: d}.Load(jsonl.Pos{}, fixtureNow)
	r.Snap.Started = StartOf(r.First, &r.Snap)
	rec := Record(&r.Snap, fixtureNow, 30*time.Second, r.Warnings())
	var b strings.Builder
	if err := WriteJSON(&b, rec); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal([]byte(b.String()), &back); err != nil {
		t.Fatal(err)
	}
	if back["type"] != "snapshot" || back["eta_s"].(float64) != 7140 {
		t.Fatalf("record: %s", b.String())
	}
	stale := 0
	for _, w := range rec.Workers {
		if w.Stale {
			stale++
			if w.Worker != "4" {
				t.Errorf("worker %s stale", w.Worker)
			}
		}
	}
	if stale != 1 {
		t.Fatalf("%d stale workers, want 1", stale)
	}
}

func TestStepVelocity(t *testing.T) {
	cases := []struct {
		cur  float64
		dir  int
		want float64
	}{{1, 1, 2}, {1, -1, 0.5}, {0, 1, 0.1}, {0.1, -1, 0.1}, {8, 1, 8}, {3, 1, 4}, {3, -1, 2}, {0, -1, 0.1}}
	for _, c := range cases {
		if got := stepVelocity(c.cur, c.dir); got != c.want {
			t.Errorf("stepVelocity(%v, %d) = %v, want %v", c.cur, c.dir, got, c.want)
		}
	}
}

func TestLogViewScroll(t *testing.T) {
	var l LogView
	for i := 0; i < 50; i++ {
		l.Append(&Entry{Head: "line " + string(rune('A'+i%26))})
	}
	out := l.Render(40, 5)
	if n := strings.Count(out, "\n") + 1; n != 5 {
		t.Fatalf("%d lines", n)
	}
	l.ScrollBy(10)
	before := l.Render(40, 5)
	// New entries keep a scrolled view still.
	l.Append(&Entry{Head: "new"}, &Entry{Head: "newer"})
	if after := l.Render(40, 5); after != before {
		t.Fatalf("scrolled view moved:\n%s\n---\n%s", before, after)
	}
	l.ScrollBy(1 << 20)
	if !strings.Contains(l.Render(40, 5), "line A") || !l.AtTop(40, 5) {
		t.Fatal("top not reached")
	}
	l.Scroll = 0
	if !strings.Contains(l.Render(40, 5), "newer") {
		t.Fatal("not following")
	}
	for i := 0; i < maxEntries; i++ {
		l.Append(&Entry{Head: "x"})
	}
	if l.Len() > maxEntries || l.Dropped == 0 {
		t.Fatalf("len %d dropped %d", l.Len(), l.Dropped)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	f.Close()
}
