package termtext

import (
	"bytes"
	"testing"
)

func TestPlain(t *testing.T) {
	cases := map[string]string{
		"\x1b[1;32mok\x1b[0m\r\n":                  "ok\n",
		"\x1b]0;title\x07$ ":                       "$ ",
		"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\": "link",
		"\x1b(Bplain\ttab":                         "plain\ttab",
		"a\rb\x08c\n":                              "abc\n",
		"\x1b[?2004h>>> ":                          ">>> ",
	}
	for in, want := range cases {
		if got := Plain(in); got != want {
			t.Errorf("Plain(%q) = %q, want %q", in, got, want)
		}
	}
}

// Map's offsets point just past the raw byte of each plain byte, and an
// escape sequence cut at the end is left out of the complete prefix.
func TestMap(t *testing.T) {
	raw := []byte("\x1b[32mhi\x1b[0m\r\n\x1b[?2004h$ ")
	plain, ends, complete := Map(raw)
	if string(plain) != "hi\n$ " || complete != len(raw) {
		t.Fatalf("Map = %q, complete %d", plain, complete)
	}
	if i := bytes.Index(plain, []byte("hi\n")); string(raw[:ends[i+2]]) != "\x1b[32mhi\x1b[0m\r\n" {
		t.Errorf("the match ends at raw %q", raw[:ends[i+2]])
	}
	for _, cut := range []string{"ok\x1b", "ok\x1b[3", "ok\x1b]0;tit", "ok\x1b]0;t\x1b", "ok\x1b("} {
		plain, _, complete := Map([]byte(cut))
		if string(plain) != "ok" || complete != 2 {
			t.Errorf("Map(%q) = %q, complete %d; want \"ok\", 2", cut, plain, complete)
		}
	}
}

func FuzzMap(f *testing.F) {
	f.Add([]byte("\x1b[1mx\x1b]0;t\x07y\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		plain, ends, complete := Map(raw)
		if len(plain) != len(ends) || complete < 0 || complete > len(raw) {
			t.Fatalf("Map(%q): %d plain bytes, %d ends, complete %d", raw, len(plain), len(ends), complete)
		}
		last := 0
		for i, e := range ends {
			if e <= last-1 || e > complete || raw[e-1] != plain[i] {
				t.Fatalf("Map(%q): plain[%d]=%q maps to raw end %d", raw, i, plain[i], e)
			}
			last = e
		}
	})
}
