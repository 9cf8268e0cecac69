package llm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// Every model event a serve request produced is recorded without its
// serve id, and the event the caller holds keeps it: the recording is the
// model's answer, whichever request asked.
func TestRecordDropsServeID(t *testing.T) {
	var events []any
	for _, typ := range protocol.ModelEvents.Types() {
		if typ == "models" {
			continue // the answer to a model-list request, never part of a call
		}
		ev := protocol.ModelEvents.New(typ)
		v := reflect.ValueOf(ev).Elem()
		v.FieldByName("Type").SetString(typ)
		id := v.FieldByName("ID")
		if id.Kind() != reflect.String {
			t.Fatalf("model event %s has no string field ID", typ)
		}
		id.SetString("req-7")
		if held := v.FieldByName("Held"); held.Kind() == reflect.String {
			held.SetString("h3")
		}
		events = append(events, ev)
	}
	file := filepath.Join(t.TempDir(), "s.jsonl")
	if err := (&Recorder{Path: file}).Record(&protocol.Request{Model: "replay/x"}, events); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var call ReplayCall
	if err := json.Unmarshal(raw, &call); err != nil {
		t.Fatal(err)
	}
	if len(call.Events) != len(events) {
		t.Fatalf("recorded %d events, want %d", len(call.Events), len(events))
	}
	for i, e := range call.Events {
		var m map[string]any
		if err := json.Unmarshal(e, &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m["id"]; ok {
			t.Errorf("recorded %s event keeps the serve id: %s", m["type"], e)
		}
		if _, ok := m["held"]; ok {
			t.Errorf("recorded %s event keeps the held conversation's name: %s", m["type"], e)
		}
		if got := reflect.ValueOf(events[i]).Elem().FieldByName("ID").String(); got != "req-7" {
			t.Errorf("recording changed the caller's %s event: id %q", m["type"], got)
		}
	}
}
