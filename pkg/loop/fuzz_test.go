package loop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The decoders of pg-loop's inputs never panic, whatever the bytes.

func FuzzReadTasks(f *testing.F) {
	f.Add(`{"id":"a","prompt":"p","verify":"true","labels":{"fresh":"true"}}` + "\n" + `{"title":"t"}`)
	f.Add(`{"prompt":1}`)
	f.Add("\n\n{")
	f.Fuzz(func(t *testing.T, in string) {
		ts, err := ReadTasks(strings.NewReader(in), "fuzz")
		if err == nil {
			for _, task := range ts {
				if task.ID == "" || (task.Prompt == "" && task.Title == "") {
					t.Fatalf("accepted a task without id or prompt: %+v", task)
				}
			}
		}
	})
}

func FuzzReadMemory(f *testing.F) {
	f.Add(`{"type":"task","task":"a","status":"started"}` + "\n" + `{"type":"message","task":"a","message":{"role":"user","content":"hi"}}` + "\n" + `{"type":"summary","keep_from":1,"summary":"s"}`)
	f.Add(`{"type":"prune","before":99}` + "\n" + `{"type":"fresh","iteration":3}`)
	f.Add(`{"type":"message","message":{"role":"tool","content":[{"type":"tool_result","id":"x","output":"` + strings.Repeat("o", 300) + `"}]}}`)
	f.Fuzz(func(t *testing.T, in string) {
		// Bad lines are skipped; only a usage no call has (negative,
		// which would buy calls past a budget) refuses the replay.
		if _, err := ReadMemory(strings.NewReader(in)); err != nil && !strings.Contains(err.Error(), ": usage: ") {
			t.Fatalf("replay must skip bad lines, got %v", err)
		}
	})
}

func FuzzReadPipeline(f *testing.F) {
	f.Add(`{"stages":[{"name":"a","prompt":"x","exit":{"file":"f","min_lines":2,"jq":".current.iteration > 1"}}]}`)
	f.Add(`{"stages":[{"name":"a","prompt":"x","exit":{"jq":"..["}}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		p := filepath.Join(t.TempDir(), "p.json")
		os.WriteFile(p, []byte(in), 0o644)
		if pl, err := ReadPipeline(p); err == nil && len(pl.Stages) == 0 {
			t.Fatal("a pipeline without stages was accepted")
		}
	})
}

func FuzzModelLine(f *testing.F) {
	f.Add(`{"type":"end","stop_reason":"end_turn","message":{"role":"assistant","content":"x"},"usage":{}}`)
	f.Add(`{"type":"error","kind":"auth","message":"no"}`)
	f.Add(`{"type":"nope"}`)
	f.Fuzz(func(t *testing.T, in string) {
		end, done, err := handleModelLine([]byte(in), nil)
		if end != nil && (err != nil || !done) {
			t.Fatal("an end event with an error")
		}
	})
}
