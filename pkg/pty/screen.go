package pty

import (
	"io"
	"strings"
	"sync"

	"github.com/hinshun/vt10x"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
)

// emulator is a VT emulator fed with a terminal's output. vt10x consumes
// whole UTF-8 sequences only, so a sequence split across writes is kept
// for the next one.
type emulator struct {
	mu    sync.Mutex
	vt    vt10x.Terminal
	rest  []byte
	reply io.Writer
	csi   csiClamp
	out   []byte
	// failed reports a panic of vt10x, after which the screen was reset:
	// the holder records it in the session's errors (nil: not reported).
	failed func(format string, args ...any)
	resets int // how many times the screen was reset
}

// csiClamp caps the numeric parameters of control sequences at five
// digits: vt10x loops once per unit of some of them (cursor tab
// forward/backward), so ESC [ 999999999 I would stall it for minutes.
// Real parameters (modes such as 1049, colors, positions) are shorter.
type csiClamp struct {
	state  int // 0 text, 1 after ESC, 2 inside CSI
	digits int // digits of the current parameter
}

func (c *csiClamp) filter(dst, src []byte) []byte {
	for _, b := range src {
		switch c.state {
		case 0:
			if b == 0x1b {
				c.state = 1
			}
		case 1:
			c.state = 0
			if b == '[' {
				c.state, c.digits = 2, 0
			} else if b == 0x1b {
				c.state = 1
			}
		case 2:
			switch {
			case b >= '0' && b <= '9':
				if c.digits >= 5 {
					continue // drop: the parameter stays at five digits
				}
				c.digits++
			case b == ';' || b == ':':
				c.digits = 0
			case b >= 0x40 && b <= 0x7e, b == 0x18, b == 0x1a:
				c.state = 0
			case b == 0x1b:
				c.state = 1
			}
		}
		dst = append(dst, b)
	}
	return dst
}

// newEmulator makes an emulator of the given size. Replies to the
// program's queries (cursor position, device attributes) go to reply;
// nil discards them. A failure of the terminal library (a panic, after
// which the screen is reset) is reported through failed when it is set.
func newEmulator(cols, rows int, reply io.Writer, failed func(format string, args ...any)) *emulator {
	opts := []vt10x.TerminalOption{vt10x.WithSize(cols, rows)}
	if reply != nil {
		opts = append(opts, vt10x.WithWriter(reply))
	}
	return &emulator{vt: vt10x.New(opts...), reply: reply, failed: failed}
}

func (e *emulator) Write(b []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.out = e.csi.filter(append(e.out[:0], e.rest...), b)
	e.rest = e.rest[:0]
	data := e.out
	n := e.feed(data)
	if n < len(data) && len(data)-n < 4 {
		e.rest = append(e.rest, data[n:]...)
	}
	return len(b), nil
}

// feed writes to vt10x; a panic in it resets the screen rather than
// taking the holder down, and is reported: the session's errors say the
// screen was lost, and tests fail on it.
func (e *emulator) feed(data []byte) (n int) {
	defer func() {
		if v := recover(); v != nil {
			e.resets++
			if e.failed != nil {
				e.failed("the terminal emulator failed on the program's output and the screen was reset: %v", v)
			}
			cols, rows := e.vt.Size()
			opts := []vt10x.TerminalOption{vt10x.WithSize(cols, rows)}
			if e.reply != nil {
				opts = append(opts, vt10x.WithWriter(e.reply))
			}
			e.vt = vt10x.New(opts...)
			n = len(data)
		}
	}()
	n, _ = e.vt.Write(data)
	return n
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
	// A key on the screen is shown redacted, as in the output file.
	if all := strings.Join(s.Lines, "\n"); secrets.Default().Has([]byte(all)) {
		if red := strings.Split(secrets.RedactString(all), "\n"); len(red) == rows {
			s.Lines = red
		}
	}
	cur := e.vt.Cursor()
	s.Cursor = protocol.PtyCursor{Row: min(cur.Y, rows-1), Col: min(cur.X, cols-1)}
	return s
}

// renderScreen replays a recorded output stream through an emulator. A
// failure of the terminal library is not reported again here: the
// holder's emulator saw the same output and recorded it in the session's
// errors.
func renderScreen(name string, cols, rows int, r io.Reader) (protocol.PtyScreen, error) {
	e := newEmulator(cols, rows, nil, nil)
	if _, err := io.Copy(e, r); err != nil {
		return protocol.PtyScreen{}, err
	}
	return e.snapshot(name), nil
}
