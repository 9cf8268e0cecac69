package pty

import (
	"io"
	"strings"
	"sync"

	"github.com/hinshun/vt10x"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// emulator is a VT emulator fed with a terminal's output. vt10x consumes
// whole UTF-8 sequences only, so a sequence split across writes is kept
// for the next one.
type emulator struct {
	mu   sync.Mutex
	vt   vt10x.Terminal
	rest []byte
}

// newEmulator makes an emulator of the given size. Replies to the
// program's queries (cursor position, device attributes) go to reply;
// nil discards them.
func newEmulator(cols, rows int, reply io.Writer) *emulator {
	opts := []vt10x.TerminalOption{vt10x.WithSize(cols, rows)}
	if reply != nil {
		opts = append(opts, vt10x.WithWriter(reply))
	}
	return &emulator{vt: vt10x.New(opts...)}
}

func (e *emulator) Write(b []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	data := b
	if len(e.rest) > 0 {
		data = append(e.rest, b...)
		e.rest = nil
	}
	n, _ := e.vt.Write(data)
	if n < len(data) && len(data)-n < 4 {
		e.rest = append([]byte(nil), data[n:]...)
	}
	return len(b), nil
}

func (e *emulator) resize(cols, rows int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.vt.Resize(cols, rows)
}

// appCursor reports whether the program switched the cursor keys to
// application mode.
func (e *emulator) appCursor() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.vt.Mode()&vt10x.ModeAppCursor != 0
}

// snapshot renders the screen: one string per row without trailing
// blanks, and the cursor position.
func (e *emulator) snapshot(name string) protocol.PtyScreen {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.vt.Lock()
	defer e.vt.Unlock()
	cols, rows := e.vt.Size()
	s := protocol.PtyScreen{Type: "screen", Name: name, Cols: cols, Rows: rows, Lines: make([]string, rows)}
	var b strings.Builder
	for y := 0; y < rows; y++ {
		b.Reset()
		for x := 0; x < cols; x++ {
			c := e.vt.Cell(x, y).Char
			if c == 0 {
				c = ' '
			}
			b.WriteRune(c)
		}
		s.Lines[y] = strings.TrimRight(b.String(), " ")
	}
	cur := e.vt.Cursor()
	s.Cursor = protocol.PtyCursor{Row: min(cur.Y, rows-1), Col: min(cur.X, cols-1)}
	return s
}

// renderScreen replays a recorded output stream through an emulator.
func renderScreen(name string, cols, rows int, r io.Reader) (protocol.PtyScreen, error) {
	e := newEmulator(cols, rows, nil)
	if _, err := io.Copy(e, r); err != nil {
		return protocol.PtyScreen{}, err
	}
	return e.snapshot(name), nil
}
