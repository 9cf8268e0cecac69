package atomicfile

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bounded runs fn and fails the test when it has not returned within a
// minute: an open(2) of a named pipe with no writer never returns.
func bounded[T any](t *testing.T, fn func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- fn() }()
	select {
	case v := <-done:
		return v
	case <-time.After(time.Minute):
		t.Fatal("still blocked after a minute")
		panic("unreachable")
	}
}

type readResult struct {
	b   []byte
	err error
}

func TestReadFileRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "worker-9.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.json")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	// A link to a file that is not the team's, regular as it is: never
	// followed (O_NOFOLLOW), never quoted.
	secret := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secret, []byte("root:SECRET-HASH:19000::::::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(dir, "outside.json")
	if err := os.Symlink(secret, outside); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.json")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	for _, tc := range []struct {
		path, kind string
	}{
		{fifo, "a named pipe (FIFO)"},
		{zero, "a symbolic link"},
		{outside, "a symbolic link"},
		{sub, "a directory"},
		{"/dev/zero", "a character device"},
		{"/dev/null", "a character device"},
		{sock, "a socket"},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			r := bounded(t, func() readResult {
				b, err := ReadFile(tc.path, RecordLimit)
				return readResult{b, err}
			})
			var ie *IrregularError
			if !errors.As(r.err, &ie) || ie.Kind != tc.kind || ie.Path != tc.path {
				t.Fatalf("ReadFile(%s) = %q, %v; want an IrregularError naming %s", tc.path, r.b, r.err, tc.kind)
			}
			want := tc.path + ": " + tc.kind + ", not a regular file: refused"
			if r.err.Error() != want {
				t.Errorf("error %q, want %q", r.err, want)
			}
			if strings.Contains(r.err.Error(), "SECRET") {
				t.Errorf("error quotes the file: %v", r.err)
			}
			o := bounded(t, func() readResult {
				f, err := Open(tc.path)
				if f != nil {
					f.Close()
					return readResult{[]byte("opened"), err}
				}
				return readResult{nil, err}
			})
			if !errors.As(o.err, &ie) || o.b != nil {
				t.Errorf("Open(%s) = %s, %v; want an IrregularError", tc.path, o.b, o.err)
			}
		})
	}
}

func TestReadFileLimit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "budget.json")
	data := bytes.Repeat([]byte("x"), 4096)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{0, true}, {4096, true}, {4095, false}, {1, false}, {RecordLimit, true}} {
		b, err := ReadFile(path, tc.limit)
		var te *TooLargeError
		switch {
		case tc.ok && (err != nil || !bytes.Equal(b, data)):
			t.Errorf("limit %d: %d bytes, %v; want the file", tc.limit, len(b), err)
		case !tc.ok && (!errors.As(err, &te) || b != nil):
			t.Errorf("limit %d: %d bytes, %v; want a TooLargeError", tc.limit, len(b), err)
		}
	}
	big := filepath.Join(dir, "worker-1.json")
	if err := os.WriteFile(big, bytes.Repeat([]byte(" "), RecordLimit+1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(big, RecordLimit)
	if want := big + ": larger than 1 MiB, too large for this record: refused"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestReadIntoReusesItsBuffer(t *testing.T) {
	dir := t.TempDir()
	var buf []byte
	for i, s := range []string{"", "a", strings.Repeat("b", 100000), "c\n", ""} {
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := ReadInto(&buf, path, RecordLimit)
		if err != nil || string(b) != s {
			t.Fatalf("read %d: %d bytes, %v; want %d", i, len(b), err, len(s))
		}
	}
	if len(buf) < 100000 {
		t.Errorf("buffer of %d bytes: not kept for the next read", len(buf))
	}
	if _, err := ReadInto(&buf, filepath.Join(dir, "missing"), 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
}

func TestOpenReadsARegularFileInBlockingMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fl, err := unixFcntl(f.Fd(), syscall.F_GETFL)
	if err != nil {
		t.Fatal(err)
	}
	if fl&syscall.O_NONBLOCK != 0 {
		t.Error("O_NONBLOCK left set on the descriptor")
	}
	b := make([]byte, 10)
	if n, err := f.Read(b); err != nil || string(b[:n]) != "{}\n" {
		t.Errorf("read %q, %v", b[:n], err)
	}
}

func unixFcntl(fd uintptr, cmd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, uintptr(cmd), 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
