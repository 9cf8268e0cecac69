package secrets

import (
	"io"
	"strings"
	"sync"
)

// MaxHold bounds what a Writer holds back waiting to see whether a secret
// is being written: a longer run is let through redacted as it stands.
const MaxHold = 4096

// Writer redacts a stream written in chunks, such as a terminal's output,
// where a secret may arrive split across two writes. It passes on at once
// everything that cannot be the start of a secret and holds back the rest
// until the next write shows how it continues, or until Flush.
type Writer struct {
	r  *Redactor
	mu sync.Mutex
	w  io.Writer
	// held is the tail of what was written that could still grow into a
	// secret.
	held []byte
}

// NewWriter returns a redacting writer over w.
func (r *Redactor) NewWriter(w io.Writer) *Writer { return &Writer{r: r, w: w} }

// Write redacts and passes on p, holding back a tail that may be the start
// of a secret. It reports len(p) written unless w fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	buf := append(w.held, p...)
	cut := w.r.holdFrom(buf)
	if len(buf)-cut > MaxHold {
		cut = len(buf)
	}
	out := w.r.Bytes(buf[:cut])
	w.held = append([]byte(nil), buf[cut:]...)
	if len(out) == 0 {
		return len(p), nil
	}
	if _, err := w.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Held reports how many bytes are held back.
func (w *Writer) Held() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.held)
}

// Flush passes on what is held back, redacted as it stands.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 {
		return nil
	}
	out := w.r.Bytes(w.held)
	w.held = nil
	_, err := w.w.Write(out)
	return err
}

// holdFrom returns where the tail of b that may be the start of a secret
// begins (len(b) when there is none): a proper prefix of a known value, a
// part of a shape's prefix, or a key shape whose run reaches the end.
func (r *Redactor) holdFrom(b []byte) int {
	s := unsafeString(b)
	cut := len(s)
	if r != nil {
		for _, v := range r.values {
			for i := max(len(s)-len(v)+1, 0); i < cut; i++ {
				if s[i] == v[0] && strings.HasPrefix(v, s[i:]) {
					cut = i
					break
				}
			}
		}
	}
	// A shape still open at the end starts in the trailing run of key
	// characters, or just before it ("Bearer " holds a space).
	run := len(s)
	for run > 0 && tokenChar(s[run-1]) {
		run--
	}
	for i := max(run-len("Bearer "), len(s)-MaxHold, 0); i < cut; i++ {
		if !firstByte[s[i]] || (i > 0 && keyChar(s[i-1])) {
			continue
		}
		if openShape(s[i:]) {
			cut = i
			break
		}
	}
	return cut
}

// openShape reports whether t, the end of a stream, may still become a
// key shape: it is a part of a prefix, or a prefix and a run of key
// characters up to its end.
func openShape(t string) bool {
	for k := range shapes {
		sh := &shapes[k]
		for _, p := range sh.prefixes {
			if len(t) < len(p) {
				if strings.HasPrefix(p, t) {
					return true
				}
				continue
			}
			if !strings.HasPrefix(t, p) {
				continue
			}
			run := t[len(p):]
			all := true
			for j := 0; j < len(run); j++ {
				if !sh.body(run[j]) {
					all = false
					break
				}
			}
			if all && (sh.max == 0 || len(run) <= sh.max) {
				return true
			}
		}
	}
	return false
}
