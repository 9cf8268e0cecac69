package termtext

import (
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

// RawEnd points just past the raw byte of the n-th text byte, and an
// escape sequence cut at the end is left out of the complete prefix.
func TestRawEndAndComplete(t *testing.T) {
	raw := []byte("\x1b[32mhi\x1b[0m\r\n\x1b[?2004h$ ")
	text, complete := Append(nil, raw)
	if string(text) != "hi\n$ " || complete != len(raw) {
		t.Fatalf("Append = %q, complete %d", text, complete)
	}
	if got := string(raw[:RawEnd(raw, 3)]); got != "\x1b[32mhi\x1b[0m\r\n" {
		t.Errorf("the text hi\\n ends at raw %q", got)
	}
	if RawEnd(raw, 0) != 0 {
		t.Errorf("RawEnd(raw, 0) = %d", RawEnd(raw, 0))
	}
	for _, cut := range []string{"ok\x1b", "ok\x1b[3", "ok\x1b]0;tit", "ok\x1b]0;t\x1b", "ok\x1b("} {
		text, complete := Append([]byte(">"), []byte(cut))
		if string(text) != ">ok" || complete != 2 {
			t.Errorf("Append(%q) = %q, complete %d; want \">ok\", 2", cut, text, complete)
		}
	}
}

// Reading a stream in pieces, passing the incomplete rest again, gives the
// text of the whole; RawEnd maps every text byte back to its raw byte.
func FuzzAppend(f *testing.F) {
	f.Add([]byte("\x1b[1mx\x1b]0;t\x07y\r\n"), uint8(5))
	f.Fuzz(func(t *testing.T, raw []byte, split uint8) {
		whole, complete := Append(nil, raw)
		if complete < 0 || complete > len(raw) {
			t.Fatalf("complete %d of %d", complete, len(raw))
		}
		k := min(int(split), len(raw))
		text, done := Append(nil, raw[:k])
		text, more := Append(text, raw[done:])
		if string(text) != string(whole) || done+more != complete {
			t.Fatalf("in pieces at %d: %q (complete %d), whole: %q (complete %d)", k, text, done+more, whole, complete)
		}
		for n := 1; n <= len(whole); n++ {
			if e := RawEnd(raw, n); e < 1 || e > complete || raw[e-1] != whole[n-1] {
				t.Fatalf("RawEnd(%q, %d) = %d", raw, n, e)
			}
		}
	})
}
