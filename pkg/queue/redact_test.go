package queue

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
)

// A failure message that holds a secret is redacted once, before the change
// is written, so every file the change writes holds the same redacted
// bytes: the task in task-queue.json, the journal of the change kept in
// its header (which recovery compares byte for byte with events.jsonl), the
// event appended to events.jsonl and the archived task. Before, the header
// kept the reason as given: task-queue.json held the secret, and its
// journal never matched what events.jsonl holds.
func TestChangeRedactedOnce(t *testing.T) {
	const secret = "queue-fail-secret-value-9"
	secrets.Register(secrets.Secret{Name: "QUEUE_TEST_TOKEN", Value: secret})
	q, _ := open(t)
	q.KeepFinished = 1
	reason := "curl failed with token " + secret + " and key AKIAIOSFODNN7EXAMPLE"
	for i := range 3 {
		add(t, q, protocol.Task{Title: "task"})
		c, err := q.Claim("w1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Fail(c.ID, c.Claim.Token, reason, false); err != nil {
			t.Fatalf("fail %d: %v", i, err)
		}
	}
	for _, name := range []string{"task-queue.json", "events.jsonl", ArchiveFile} {
		b, err := os.ReadFile(filepath.Join(q.Dir().Path(), name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("AKIAIOSFODNN7EXAMPLE")) {
			t.Errorf("%s holds the secret:\n%s", name, b)
		}
		if !bytes.Contains(b, []byte("[redacted:QUEUE_TEST_TOKEN]")) {
			t.Errorf("%s does not show the redaction:\n%s", name, b)
		}
	}
	// The header's journal is what the last change appended, byte for byte.
	s, err := load(q.Dir().Path())
	if err != nil {
		t.Fatal(err)
	}
	events, err := os.ReadFile(q.Dir().Events())
	if err != nil {
		t.Fatal(err)
	}
	if s.hdr.Journal == nil || len(s.hdr.Journal.Events) == 0 {
		t.Fatal("task-queue.json has no journal")
	}
	var want []string
	for _, ev := range s.hdr.Journal.Events {
		var b bytes.Buffer
		if err := json.Compact(&b, ev); err != nil {
			t.Fatal(err)
		}
		want = append(want, b.String())
	}
	if got := strings.Split(strings.TrimSuffix(string(events[s.hdr.Journal.Offset:]), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events.jsonl after the journal's offset:\n%s\nthe journal in task-queue.json:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
