package main

import (
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// The reference names the records without a type (documents, input lines,
// parts of other records), and only those.
func TestUntypedSchemas(t *testing.T) {
	got, err := untypedSchemas(protocol.SchemaNames())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"task", "worker", "tool-def", "tool-list", "message", "request", "tool-call"} {
		if !strings.Contains(got, "["+n+"](#"+n+")") {
			t.Errorf("%s has no type, but the list misses it: %s", n, got)
		}
	}
	for _, n := range []string{"loop-event", "tool-result", "tool-output", "error", "model-event", "worker-status", "journal-event"} {
		if strings.Contains(got, "["+n+"](#"+n+")") {
			t.Errorf("%s has a type, but the list names it: %s", n, got)
		}
	}
}
