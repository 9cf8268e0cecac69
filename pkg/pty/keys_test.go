package pty

import "testing"

func TestEncodeKey(t *testing.T) {
	cases := []struct {
		name string
		app  bool
		want string
	}{
		{"Enter", false, "\r"}, {"enter", false, "\r"}, {"Tab", false, "\t"}, {"Esc", false, "\x1b"},
		{"C-c", false, "\x03"}, {"C-C", false, "\x03"}, {"ctrl-d", false, "\x04"}, {"^Z", false, "\x1a"},
		{"C-@", false, "\x00"}, {"C-[", false, "\x1b"}, {"C-\\", false, "\x1c"},
		{"Up", false, "\x1b[A"}, {"Up", true, "\x1bOA"}, {"Left", true, "\x1bOD"}, {"PgDn", true, "\x1b[6~"},
		{"F1", false, "\x1bOP"}, {"F12", false, "\x1b[24~"}, {"M-x", false, "\x1bx"}, {"M-Enter", false, "\x1b\r"},
		{"q", false, "q"}, {":", false, ":"}, {"é", false, "é"}, {"Backspace", false, "\x7f"},
	}
	for _, c := range cases {
		got, err := EncodeKey(c.name, c.app)
		if err != nil || got != c.want {
			t.Errorf("EncodeKey(%q, %v) = %q, %v; want %q", c.name, c.app, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "Foo", "C-", "C-ab", "M-Foo"} {
		if _, err := EncodeKey(bad, false); err == nil {
			t.Errorf("EncodeKey(%q) accepted", bad)
		}
	}
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]int{"KILL": 9, "sigterm": 15, "SIGHUP": 1, "int": 2, "9": 9} {
		got, err := ParseSignal(in)
		if err != nil || int(got) != want {
			t.Errorf("ParseSignal(%q) = %d, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "NOPE", "0", "99"} {
		if _, err := ParseSignal(bad); err == nil {
			t.Errorf("ParseSignal(%q) accepted", bad)
		}
	}
}
