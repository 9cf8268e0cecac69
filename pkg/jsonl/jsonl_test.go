package jsonl

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/secrets"
)

func TestDecoderLineNumbers(t *testing.T) {
	in := "{\"a\":1}\n\n  \n{\"a\":2}\r\n{\"a\":\n"
	d := NewDecoder(strings.NewReader(in), "tasks.jsonl")
	var v struct{ A int }
	for _, want := range []int{1, 2} {
		if err := d.Decode(&v); err != nil || v.A != want {
			t.Fatalf("decode: %v %v", v, err)
		}
	}
	err := d.Decode(&v)
	var le *LineError
	if !errors.As(err, &le) || le.Line != 5 || !le.BadInput() {
		t.Fatalf("want an error at line 5, got %v", err)
	}
	if err.Error() != "tasks.jsonl:5: invalid JSON: unexpected end of line" {
		t.Fatalf("message: %q", err)
	}
	if err := d.Decode(&v); err != io.EOF {
		t.Fatalf("want EOF, got %v", err)
	}
}

func TestDecoderStrictAndTypes(t *testing.T) {
	var v struct {
		A int `json:"a"`
	}
	err := NewDecoder(strings.NewReader(`{"a":1,"b":2}`), "").Strict().Decode(&v)
	if err == nil || !strings.Contains(err.Error(), `line 1: json: unknown field "b"`) {
		t.Fatalf("strict: %v", err)
	}
	err = NewDecoder(strings.NewReader(`{"a":"x"}`), "in").Decode(&v)
	if err == nil || err.Error() != `in:1: field "a": expected int, got string` {
		t.Fatalf("type: %v", err)
	}
	err = NewDecoder(strings.NewReader(`{"a":1} {"a":2}`), "in").Decode(&v)
	if err == nil || !strings.Contains(err.Error(), "more than one value") {
		t.Fatalf("two values: %v", err)
	}
}

func TestDecoderLongLinesAndNoFinalNewline(t *testing.T) {
	long := strings.Repeat("x", 300<<10)
	in := `{"s":"` + long + `"}` + "\n" + `{"s":"end"}`
	d := NewDecoder(strings.NewReader(in), "")
	var v struct{ S string }
	if err := d.Decode(&v); err != nil || len(v.S) != len(long) {
		t.Fatalf("long line: %v %d", err, len(v.S))
	}
	if err := d.Decode(&v); err != nil || v.S != "end" || d.Line() != 2 {
		t.Fatalf("last line: %v %q %d", err, v.S, d.Line())
	}
}

func TestMarshalNoHTMLEscape(t *testing.T) {
	b, err := Marshal(map[string]string{"s": "<a&b>"})
	if err != nil || string(b) != "{\"s\":\"<a&b>\"}\n" {
		t.Fatalf("%q %v", b, err)
	}
}

func TestAppendRepairsTornTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	// A write cut short: the fragment is blanked, never left as a line.
	os.WriteFile(p, []byte(`{"a":1}`+"\n"+`{"a":`), 0o644)
	if err := Append(p, map[string]int{"a": 2}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != "{\"a\":1}\n     \n{\"a\":2}\n" {
		t.Fatalf("%q", b)
	}
	// A whole record that only lacks its newline is kept.
	os.WriteFile(p, []byte(`{"a":1}`), 0o644)
	if err := Append(p, map[string]int{"a": 2}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "{\"a\":1}\n{\"a\":2}\n" {
		t.Fatalf("%q", b)
	}
	// A long fragment, beyond the first block read backwards.
	frag := `{"pad":"` + strings.Repeat("x", 10000)
	os.WriteFile(p, []byte("{}\n"+frag), 0o644)
	if err := Append(p, map[string]int{"a": 3}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "{}\n"+strings.Repeat(" ", len(frag))+"\n{\"a\":3}\n" {
		t.Fatalf("%.40q", b)
	}
	if err := AppendRaw(p, []byte("no newline")); err == nil {
		t.Fatal("AppendRaw accepted data without a final newline")
	}
}

func next(t *testing.T, f *Follower) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	line, err := f.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return string(line)
}

func write(t *testing.T, p, s string, flag int) {
	t.Helper()
	f, err := os.OpenFile(p, flag|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(s)
	f.Close()
}

func TestFollowLateTruncatedReplaced(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "events.jsonl")
	f := Follow(p, FollowOptions{Poll: 5 * time.Millisecond})
	defer f.Close()
	// The file appears late: read from its start.
	go func() {
		time.Sleep(30 * time.Millisecond)
		write(t, p, "one\ntw", os.O_APPEND)
		time.Sleep(30 * time.Millisecond)
		write(t, p, "o\n", os.O_APPEND)
	}()
	if got := next(t, f); got != "one" {
		t.Fatalf("got %q", got)
	}
	// A half-written line is not returned until its newline arrives.
	if got := next(t, f); got != "two" {
		t.Fatalf("got %q", got)
	}
	// Truncation: start over.
	write(t, p, "", os.O_TRUNC)
	time.Sleep(20 * time.Millisecond)
	write(t, p, "three\n", os.O_APPEND)
	if got := next(t, f); got != "three" {
		t.Fatalf("after truncate: %q", got)
	}
	// Replacement by rename: the old file is drained, then the new one read
	// from its start.
	write(t, p, "four\n", os.O_APPEND)
	tmp := filepath.Join(dir, "new")
	write(t, tmp, "five\n", os.O_TRUNC)
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	if got := next(t, f); got != "four" {
		t.Fatalf("drain before replace: %q", got)
	}
	if got := next(t, f); got != "five" {
		t.Fatalf("after replace: %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := f.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a timeout with nothing new, got %v", err)
	}
}

// TestFollowTruncatedAndRegrown: between two polls the file is truncated
// and written again past the old offset (same inode, larger size). The
// follower must start over, not read from the middle of the new content.
func TestFollowTruncatedAndRegrown(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	write(t, p, "aaaa\nbbbb\n", os.O_TRUNC)
	f := Follow(p, FollowOptions{FromStart: true, Poll: 5 * time.Millisecond})
	defer f.Close()
	if got := next(t, f); got != "aaaa" {
		t.Fatalf("got %q", got)
	}
	if got := next(t, f); got != "bbbb" {
		t.Fatalf("got %q", got)
	}
	// Let it poll at the end of the file once.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	f.Next(ctx)
	cancel()
	write(t, p, "a much longer first line\nsecond\n", os.O_TRUNC)
	if got := next(t, f); got != "a much longer first line" {
		t.Fatalf("after truncate and regrow: %q", got)
	}
	if got := next(t, f); got != "second" {
		t.Fatalf("got %q", got)
	}
	// Appends after that are read on as usual.
	write(t, p, "third\n", os.O_APPEND)
	if got := next(t, f); got != "third" {
		t.Fatalf("got %q", got)
	}
}

func TestFollowFromEnd(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	write(t, p, "old\n", os.O_TRUNC)
	f := Follow(p, FollowOptions{Poll: 5 * time.Millisecond})
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if _, err := f.Next(ctx); err == nil {
		t.Fatal("an existing line was returned without FromStart")
	}
	cancel()
	write(t, p, "new\n", os.O_APPEND)
	if got := next(t, f); got != "new" {
		t.Fatalf("got %q", got)
	}
}

func FuzzDecoder(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n\n{\"b\":[1,2]}\n"))
	f.Add([]byte("{\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDecoder(strings.NewReader(string(data)), "fuzz")
		last := 0
		for {
			var v any
			err := d.Decode(&v)
			if err == io.EOF {
				return
			}
			if d.Line() < last {
				t.Fatalf("line numbers went back: %d after %d", d.Line(), last)
			}
			last = d.Line()
			var le *LineError
			if err != nil && !errors.As(err, &le) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			if err != nil {
				return
			}
		}
	})
}

// Every journal line is redacted: a registered secret and a key shape.
func TestAppendRedacts(t *testing.T) {
	secrets.Register(secrets.Secret{Name: "JOURNAL_TOKEN", Value: "journal-token-value-1"})
	p := filepath.Join(t.TempDir(), "events.jsonl")
	if err := Append(p, map[string]string{"msg": "token journal-token-value-1 key AKIAIOSFODNN7EXAMPLE"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != `{"msg":"token [redacted:JOURNAL_TOKEN] key [redacted:aws-access-key]"}`+"\n" {
		t.Fatalf("got %s", b)
	}
}

// AppendRedacted appends what its caller redacted as it is, with the same
// line rules as AppendRaw: the caller's redaction is the one pass of that
// write path.
func TestAppendRedacted(t *testing.T) {
	secrets.Register(secrets.Secret{Name: "JOURNAL_TOKEN", Value: "journal-token-value-1"})
	p := filepath.Join(t.TempDir(), "task-archive.jsonl")
	line := secrets.Redact([]byte(`{"error":"token journal-token-value-1"}` + "\n"))
	if err := AppendRedacted(p, line); err != nil {
		t.Fatal(err)
	}
	if err := AppendRedacted(p, []byte("no newline")); err == nil {
		t.Fatal("AppendRedacted accepted data without a final newline")
	}
	if b, _ := os.ReadFile(p); string(b) != `{"error":"token [redacted:JOURNAL_TOKEN]"}`+"\n" {
		t.Fatalf("got %s", b)
	}
}

// TestFollowStartMarksTheEnd: a follower from the end that is started
// returns the lines appended after Start, even before its first Next
// (without Start, the end is where the first Next finds it).
func TestFollowStartMarksTheEnd(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	write(t, p, "old\n", os.O_TRUNC)
	f := Follow(p, FollowOptions{Poll: 5 * time.Millisecond})
	defer f.Close()
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	write(t, p, "new\n", os.O_APPEND)
	if got := next(t, f); got != "new" {
		t.Fatalf("got %q, want the line appended after Start", got)
	}
}
