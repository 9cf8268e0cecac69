// Package termtext turns what a program wrote to a terminal into the text a
// person reads in a scrolling terminal: escape sequences (CSI, OSC and
// two-byte escapes) removed, CRLF as LF, other control characters dropped.
// pg-pty's read --plain and pg-tool's term_read show this text, and a
// pattern waited for is matched against it, so a model can wait for what
// it saw. Visible (visible.go) goes the other way: it shows the control
// characters of untrusted text (a task's title, a tool's output) on a
// terminal instead of letting the terminal obey them.
package termtext

// Plain is the text of raw terminal output.
func Plain(s string) string {
	plain, _, _ := Map([]byte(s))
	return string(plain)
}

// Map returns the plain text of raw; for each byte of it, the offset in
// raw just past the byte it came from (so a match ending at plain[:e] ends
// at raw[:ends[e-1]]); and complete, the length of the longest prefix of
// raw that does not end inside an unfinished escape sequence (the rest may
// be completed by output still to come).
func Map(raw []byte) (plain []byte, ends []int, complete int) {
	plain = make([]byte, 0, len(raw))
	ends = make([]int, 0, len(raw))
	complete = len(raw)
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == 0x1b && i+1 == len(raw):
			return plain, ends, i // a lone ESC at the end
		case c == 0x1b && raw[i+1] == '[': // CSI ... final byte
			j := i + 2
			for j < len(raw) && (raw[j] < 0x40 || raw[j] > 0x7e) {
				j++
			}
			if j == len(raw) {
				return plain, ends, i
			}
			i = j
		case c == 0x1b && raw[i+1] == ']': // OSC ... BEL or ST
			j := i + 2
			for j < len(raw) && raw[j] != 0x07 && !(raw[j] == 0x1b && j+1 < len(raw) && raw[j+1] == '\\') {
				j++
			}
			if j >= len(raw)-1 && !(j < len(raw) && raw[j] == 0x07) {
				return plain, ends, i
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
				return plain, ends, i
			}
			i = j
		case c == '\r':
			// CRLF is LF; a lone CR (a progress line redrawn) is dropped.
		case c < 0x20 && c != '\n' && c != '\t':
		default:
			plain = append(plain, c)
			ends = append(ends, i+1)
		}
	}
	return plain, ends, complete
}
