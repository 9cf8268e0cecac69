package proc

import (
	"os"
	"testing"
)

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Stat
		bad  bool
	}{
		{in: "42 (sleep) S 1 42 42 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 12345 1000 100 18446744073709551615",
			want: Stat{PID: 42, Comm: "sleep", State: 'S', PPID: 1, PGID: 42, SID: 42, Flags: 4194304, Start: "12345"}},
		// The command name may hold spaces and parentheses: ") S 1 1 1" in
		// it must not be read as fields.
		{in: "7 (a) S 1 1 1 (b) R 3 7 5 34816 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0",
			want: Stat{PID: 7, Comm: "a) S 1 1 1 (b", State: 'R', PPID: 3, PGID: 7, SID: 5, TTY: 34816, Start: "99"}},
		{in: "", bad: true},
		{in: "7 (x) S 1 2", bad: true},
		{in: "x (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 20 0 1 0 99", bad: true},
		{in: "7 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 20 0 1 0 -99", bad: true},
		{in: "7 x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 20 0 1 0 99", bad: true},
	} {
		got, err := ParseStat([]byte(c.in))
		if c.bad {
			if err == nil {
				t.Errorf("ParseStat(%q) = %+v, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseStat(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func TestReadStatSelf(t *testing.T) {
	s, err := ReadStat(os.Getpid())
	if err != nil || s.PID != os.Getpid() || s.PPID != os.Getppid() || s.PGID != mustPgid(t) || !s.Alive() {
		t.Fatalf("ReadStat(self) = %+v, %v", s, err)
	}
	for _, pid := range []int{0, -1, 1 << 30} {
		if _, err := ReadStat(pid); err != ErrGone {
			t.Errorf("ReadStat(%d): %v, want ErrGone", pid, err)
		}
	}
}

// FuzzParseStat: no input makes the parser panic, and what it accepts
// has the fields a signal check relies on.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("42 (sleep) S 1 42 42 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 12345 1000"))
	f.Add([]byte("1 ()) R 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStat(b)
		if err == nil && (s.Start == "" || s.State == 0) {
			t.Fatalf("accepted %q as %+v", b, s)
		}
	})
}

func mustPgid(t *testing.T) int {
	t.Helper()
	pg, err := syscallGetpgid()
	if err != nil {
		t.Fatal(err)
	}
	return pg
}
