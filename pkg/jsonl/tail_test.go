package jsonl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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

func lines(r Read) string {
	var out []string
	for _, l := range r.Lines {
		out = append(out, string(l))
	}
	return strings.Join(out, "|")
}

func TestReadFrom(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log.jsonl")
	pos := Pos{Path: path}

	r, err := ReadFrom(pos, 0, 0)
	if err != nil || !r.Missing || len(r.Lines) != 0 {
		t.Fatalf("missing file: %+v %v", r, err)
	}
	appendFile(t, path, "a\nb\npart")
	r, _ = ReadFrom(r.Pos, 0, 0)
	if lines(r) != "a|b" {
		t.Fatalf("lines = %q", lines(r))
	}
	appendFile(t, path, "ial\n\nc\n")
	r, _ = ReadFrom(r.Pos, 0, 0)
	if lines(r) != "partial|c" || r.Reset != "" {
		t.Fatalf("lines = %q reset %q", lines(r), r.Reset)
	}
	// Nothing new.
	r, _ = ReadFrom(r.Pos, 0, 0)
	if len(r.Lines) != 0 {
		t.Fatalf("lines = %q", lines(r))
	}
	// Truncated in place.
	if err := os.WriteFile(path, []byte("d\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _ = ReadFrom(r.Pos, 0, 0)
	if lines(r) != "d" || r.Reset != "truncated" {
		t.Fatalf("after truncation: %q reset %q", lines(r), r.Reset)
	}
	// Rotated: renamed away and a new file made.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, "e\nf\n")
	r, _ = ReadFrom(r.Pos, 0, 0)
	if lines(r) != "e|f" || r.Reset != "rotated" {
		t.Fatalf("after rotation: %q reset %q", lines(r), r.Reset)
	}
	// Removed.
	os.Remove(path)
	r, _ = ReadFrom(r.Pos, 0, 0)
	if !r.Missing || r.Reset != "removed" {
		t.Fatalf("after removal: %+v", r)
	}
	// Its successor is a new file, read from the start.
	appendFile(t, path, "g\n")
	r, _ = ReadFrom(r.Pos, 1, 0)
	if lines(r) != "g" || r.Reset != "rotated" {
		t.Fatalf("after re-creation: %q reset %q", lines(r), r.Reset)
	}
}

func TestReadFromBacklog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.jsonl")
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		b.WriteString(strings.Repeat("x", 99) + "\n")
	}
	b.WriteString("last\n")
	appendFile(t, path, b.String())
	r, err := ReadFrom(Pos{Path: path}, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	// 1000 bytes back lands inside a line: that partial line is dropped.
	n := len(r.Lines)
	if n != 10 || string(r.Lines[n-1]) != "last" {
		t.Fatalf("got %d lines", n)
	}
	for _, l := range r.Lines[:n-1] {
		if len(l) != 99 {
			t.Fatalf("partial line kept: %q", l)
		}
	}
}

// TestReadFromBacklogAtLineStart: a backlog that begins exactly where a
// line begins keeps that line.
func TestReadFromBacklogAtLineStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.jsonl")
	appendFile(t, path, "first\nsecond\nthird\n")
	r, err := ReadFrom(Pos{Path: path}, int64(len("second\nthird\n")), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := lines(r); got != "second|third" {
		t.Fatalf("lines %q, want second|third", got)
	}
}

// TestReadFromRewrittenInPlace: between two reads the file is truncated and
// written again past the offset. One variant keeps the first bytes (a
// journal that starts with the same long line), the other the bytes before
// the offset; either way the reader starts over instead of reading on from
// the middle of the new content.
func TestReadFromRewrittenInPlace(t *testing.T) {
	first := `{"seq":1,"type":"team","msg":"` + strings.Repeat("x", 80) + `"}` + "\n"
	for _, tc := range []struct{ name, before, after string }{
		{"same head", first + "{\"seq\":2}\n", first + "{\"seq\":9}\n{\"seq\":10}\n"},
		{"same tail", "{\"a\":1}\n" + first, "{\"c\":3}\n" + first + "{\"d\":4}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			appendFile(t, path, tc.before)
			r, err := ReadFrom(Pos{Path: path}, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tc.after), 0o644); err != nil {
				t.Fatal(err)
			}
			want := strings.Join(strings.Split(strings.TrimSuffix(tc.after, "\n"), "\n"), "|")
			r, _ = ReadFrom(r.Pos, 0, 0)
			if lines(r) != want || r.Reset != "truncated" {
				t.Fatalf("got %q reset %q, want %q from the start", lines(r), r.Reset, want)
			}
		})
	}
}

// TestReadFromLimit: a read stops at its limit and says there is more; the
// next read goes on inside the cut line.
func TestReadFromLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.jsonl")
	appendFile(t, path, "one\ntwo\nthree\n")
	r, _ := ReadFrom(Pos{Path: path}, 0, 6)
	if lines(r) != "one" || !r.More {
		t.Fatalf("first read: %q more %v", lines(r), r.More)
	}
	r, _ = ReadFrom(r.Pos, 0, 0)
	if lines(r) != "two|three" || r.More || r.Reset != "" {
		t.Fatalf("second read: %q more %v reset %q", lines(r), r.More, r.Reset)
	}
}

// TestFollowAfterClose: a Next after Close goes on where the follower was,
// instead of reading the file again from its start.
func TestFollowAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	appendFile(t, path, "one\ntwo\n")
	f := Follow(path, FollowOptions{FromStart: true, Poll: 5 * time.Millisecond})
	if got := next(t, f); got != "one" {
		t.Fatalf("got %q", got)
	}
	if got := next(t, f); got != "two" {
		t.Fatalf("got %q", got)
	}
	f.Close()
	appendFile(t, path, "three\n")
	if got := next(t, f); got != "three" {
		t.Fatalf("after Close: got %q, want the next line", got)
	}
	f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if line, err := f.Next(ctx); err == nil {
		t.Fatalf("after Close: got %q with nothing new", line)
	}
}
