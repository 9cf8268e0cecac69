package pty

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// The emulator sees whatever a program prints: no input may break it, and
// the screen always has its size with valid UTF-8 rows.
func FuzzEmulator(f *testing.F) {
	for _, s := range []string{"hello\r\nworld", "\x1b[2J\x1b[H\x1b[?1049h", "\x1b[999;999H\x1b[6n", "\x1b]0;title\x07", "é\xe2\x82", "\x1b[?25l\x1b[1;31mred\x1b[0m", "\x1b[5S\x1b[3L\x1b[2M\x1b[4@\x1b[4P", "\x1b[0;0r\x1b[99;1r\x1bD\x1bM"} {
		f.Add([]byte(s), uint8(80), uint8(24))
	}
	f.Fuzz(func(t *testing.T, data []byte, cols, rows uint8) {
		c, r := int(cols%160)+1, int(rows%60)+1
		e := newEmulator(c, r, nil, t.Errorf)
		// In two writes, to split sequences.
		half := len(data) / 2
		e.Write(data[:half])
		e.Write(data[half:])
		s := e.snapshot("f")
		if s.Cols != c || s.Rows != r || len(s.Lines) != r {
			t.Fatalf("screen %dx%d with %d lines, want %dx%d", s.Cols, s.Rows, len(s.Lines), c, r)
		}
		if s.Cursor.Row < 0 || s.Cursor.Row >= r || s.Cursor.Col < 0 || s.Cursor.Col >= c {
			t.Fatalf("cursor %+v outside %dx%d", s.Cursor, c, r)
		}
		for _, l := range s.Lines {
			if !utf8.ValidString(l) {
				t.Fatalf("invalid UTF-8 row %q", l)
			}
		}
	})
}

func FuzzEncodeKey(f *testing.F) {
	for _, s := range []string{"Enter", "C-c", "M-x", "F12", "^[", "q", "ctrl-\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		s, err := EncodeKey(name, false)
		if err == nil && s == "" {
			t.Fatalf("%q encodes to nothing", name)
		}
		if err == nil && len([]rune(name)) > 1 && bytes.ContainsAny([]byte(s), "\n") {
			t.Fatalf("%q encodes to a newline", name)
		}
	})
}
