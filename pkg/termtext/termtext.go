// Package termtext turns what a program wrote to a terminal into the text a
// person reads in a scrolling terminal: escape sequences (CSI, OSC and
// two-byte escapes) removed, CRLF as LF, other control characters dropped.
// pg-pty's read --plain and pg-tool's term_read show this text, and a
// pattern waited for is matched against it, so a model can wait for what
// it saw.
package termtext

// Plain is the text of raw terminal output.
func Plain(s string) string {
	plain, _ := Append(nil, []byte(s))
	return string(plain)
}

// Append appends the text of raw to dst. complete is the length of the
// longest prefix of raw that does not end inside an unfinished escape
// sequence: output still to come may finish it, so a caller that reads a
// stream passes raw[complete:] again with what follows.
func Append(dst, raw []byte) (text []byte, complete int) {
	complete = len(raw)
	walk(raw, func(i int) { dst = append(dst, raw[i]) }, &complete)
	return dst, complete
}

// RawEnd is where in raw the first n bytes of its text end: the offset just
// past the byte that gives the n-th (0 for n = 0). A match that ends at
// text[:n] ends at raw[:RawEnd(raw, n)].
func RawEnd(raw []byte, n int) int {
	if n <= 0 {
		return 0
	}
	end, count := 0, 0
	walk(raw, func(i int) {
		if count < n {
			count++
			end = i + 1
		}
	}, nil)
	return end
}

// walk calls keep with the index of each byte of raw that is text. It
// stops at an unfinished escape sequence at the end, whose start it stores
// in *cut.
func walk(raw []byte, keep func(i int), cut *int) {
	stop := func(i int) {
		if cut != nil {
			*cut = i
		}
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == 0x1b && i+1 == len(raw):
			stop(i) // a lone ESC at the end
			return
		case c == 0x1b && raw[i+1] == '[': // CSI ... final byte
			j := i + 2
			for j < len(raw) && (raw[j] < 0x40 || raw[j] > 0x7e) {
				j++
			}
			if j == len(raw) {
				stop(i)
				return
			}
			i = j
		case c == 0x1b && raw[i+1] == ']': // OSC ... BEL or ST
			j := i + 2
			for j < len(raw) && raw[j] != 0x07 && !(raw[j] == 0x1b && j+1 < len(raw) && raw[j+1] == '\\') {
				j++
			}
			if j >= len(raw)-1 && !(j < len(raw) && raw[j] == 0x07) {
				stop(i)
				return
			}
			if raw[j] == 0x1b {
				j++
			}
			i = j
		case c == 0x1b: // ESC, intermediates (0x20-0x2f), final byte: ESC ( B
			j := i + 1
			for j < len(raw) && raw[j] >= 0x20 && raw[j] <= 0x2f {
				j++
			}
			if j == len(raw) {
				stop(i)
				return
			}
			i = j
		case c == '\r':
			// CRLF is LF; a lone CR (a progress line redrawn) is dropped.
		case c < 0x20 && c != '\n' && c != '\t':
		default:
			keep(i)
		}
	}
}
