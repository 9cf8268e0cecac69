package pty

import (
	"fmt"
	"sort"
	"strings"
)

// namedKeys are the bytes a terminal sends for a key. Cursor keys have a
// second form in application cursor mode (DECCKM), which full-screen
// programs switch on.
var namedKeys = map[string]string{
	"enter": "\r", "return": "\r", "tab": "\t", "btab": "\x1b[Z", "s-tab": "\x1b[Z",
	"esc": "\x1b", "escape": "\x1b", "space": " ", "backspace": "\x7f", "bs": "\x7f",
	"up": "\x1b[A", "down": "\x1b[B", "right": "\x1b[C", "left": "\x1b[D",
	"home": "\x1b[H", "end": "\x1b[F",
	"pgup": "\x1b[5~", "pageup": "\x1b[5~", "ppage": "\x1b[5~",
	"pgdn": "\x1b[6~", "pagedown": "\x1b[6~", "npage": "\x1b[6~",
	"insert": "\x1b[2~", "ins": "\x1b[2~", "delete": "\x1b[3~", "del": "\x1b[3~", "dc": "\x1b[3~",
	"f1": "\x1bOP", "f2": "\x1bOQ", "f3": "\x1bOR", "f4": "\x1bOS",
	"f5": "\x1b[15~", "f6": "\x1b[17~", "f7": "\x1b[18~", "f8": "\x1b[19~",
	"f9": "\x1b[20~", "f10": "\x1b[21~", "f11": "\x1b[23~", "f12": "\x1b[24~",
}

var appCursorKeys = map[string]string{
	"up": "\x1bOA", "down": "\x1bOB", "right": "\x1bOC", "left": "\x1bOD",
	"home": "\x1bOH", "end": "\x1bOF",
}

// KeyNames lists the named keys, for help and error messages.
func KeyNames() string {
	seen := map[string]bool{}
	var names []string
	for n := range namedKeys {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ") + ", C-a..C-z, C-@, C-[, C-\\, C-], C-^, C-_, M-<key>, or one character"
}

// EncodeKey returns the bytes for a key: a name such as Enter, Up or F5
// (any case), C-x or ^X for control characters, M-x for Meta (Esc then
// the key), or a single character standing for itself. appCursor selects
// the cursor-key form used in application cursor mode.
func EncodeKey(name string, appCursor bool) (string, error) {
	if name == "" {
		return "", fmt.Errorf("empty key name")
	}
	if len([]rune(name)) == 1 {
		return name, nil
	}
	low := strings.ToLower(name)
	if s, ok := namedKeys[low]; ok {
		if a, ok := appCursorKeys[low]; ok && appCursor {
			return a, nil
		}
		return s, nil
	}
	for _, p := range []string{"m-", "a-", "alt-", "meta-"} {
		if strings.HasPrefix(low, p) {
			s, err := EncodeKey(name[len(p):], appCursor)
			if err != nil {
				return "", err
			}
			return "\x1b" + s, nil
		}
	}
	var rest string
	for _, p := range []string{"c-", "ctrl-", "^"} {
		if strings.HasPrefix(low, p) {
			rest = name[len(p):]
			break
		}
	}
	if len(rest) == 1 {
		c := rest[0]
		switch {
		case c >= 'a' && c <= 'z':
			return string(rune(c - 'a' + 1)), nil
		case c >= 'A' && c <= 'Z':
			return string(rune(c - 'A' + 1)), nil
		case c == '@' || c == ' ' || c == '2':
			return "\x00", nil
		case c == '[':
			return "\x1b", nil
		case c == '\\':
			return "\x1c", nil
		case c == ']':
			return "\x1d", nil
		case c == '^':
			return "\x1e", nil
		case c == '_' || c == '/':
			return "\x1f", nil
		case c == '?':
			return "\x7f", nil
		}
	} else if strings.EqualFold(rest, "space") {
		return "\x00", nil
	}
	return "", fmt.Errorf("unknown key %q (known: %s)", name, KeyNames())
}

// EncodeKeys encodes a list of keys in order.
func EncodeKeys(names []string, appCursor bool) (string, error) {
	var b strings.Builder
	for _, n := range names {
		s, err := EncodeKey(strings.TrimSpace(n), appCursor)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}
