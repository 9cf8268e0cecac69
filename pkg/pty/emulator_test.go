package pty

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hinshun/vt10x"
)

// Control sequences with huge or many parameters must not stall the
// emulator (vt10x loops once per unit of some counts).
func TestEmulatorHostileSequences(t *testing.T) {
	var cases []string
	for f := byte(0x40); f <= 0x7e; f++ {
		for _, p := range []string{"999", "0", "999;999", "?999", "1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20;21;22;23;24;25;26;27;28;29;30;31;32;33;34;35;36;37;38;39;40"} {
			cases = append(cases, "\x1b["+p+string(f))
		}
	}
	for f := byte(0x20); f <= 0x7e; f++ {
		cases = append(cases, "\x1b[999999999"+string(f), "\x1b"+string(f)+"x", "\x1b#"+string(f), "\x1b("+string(f), "\x1b]"+string(f)+"\x07", "\x1bP"+string(f)+"\x1b\\")
	}
	for _, s := range cases {
		done := make(chan any)
		go func() {
			// A panic is reported, not swallowed: one that escapes the
			// emulator, and one inside vt10x that made it reset the screen.
			defer func() { done <- recover() }()
			e := newEmulator(200, 100, nil, func(format string, args ...any) {
				t.Errorf("on %q: "+format, append([]any{s}, args...)...)
			})
			e.Write([]byte("abc\r\n" + s + "def"))
			e.snapshot("x")
		}()
		select {
		case v := <-done:
			if v != nil {
				t.Errorf("panic on %q: %v", s, v)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("hang on %q", s)
		}
	}
}

// Private modes with four digits reach the emulator intact: the alternate
// screen (1049) is entered and left.
func TestEmulatorAlternateScreen(t *testing.T) {
	e := newEmulator(20, 3, nil, t.Errorf)
	e.Write([]byte("shell$ "))
	e.Write([]byte("\x1b[?1049h\x1b[H\x1b[2Jfull screen"))
	if s := e.snapshot("a"); s.Lines[0] != "full screen" {
		t.Fatalf("alternate screen: %q", s.Lines)
	}
	e.Write([]byte("\x1b[?10"))
	e.Write([]byte("49l")) // split across writes
	if s := e.snapshot("a"); s.Lines[0] != "shell$" || s.Cursor.Col != 7 {
		t.Fatalf("back on the normal screen: %q %+v", s.Lines, s.Cursor)
	}
}

// panicky is a terminal library that fails on its next write.
type panicky struct{ vt10x.Terminal }

func (panicky) Write([]byte) (int, error) { panic("index out of range") }

// A panic of the terminal library resets the screen, and is reported (the
// holder records it in the session's errors) instead of being swallowed.
func TestEmulatorReportsLibraryPanic(t *testing.T) {
	var got []string
	e := newEmulator(20, 3, nil, func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) })
	e.Write([]byte("before"))
	e.vt = panicky{e.vt}
	e.Write([]byte("boom"))
	if len(got) != 1 || !strings.Contains(got[0], "screen was reset: index out of range") || e.resets != 1 {
		t.Fatalf("reported %q, %d resets", got, e.resets)
	}
	e.Write([]byte("after"))
	if s := e.snapshot("p"); s.Lines[0] != "after" || s.Cols != 20 || s.Rows != 3 {
		t.Fatalf("screen after the reset: %q %dx%d", s.Lines, s.Cols, s.Rows)
	}
}
