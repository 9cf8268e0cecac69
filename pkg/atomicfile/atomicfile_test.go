package atomicfile

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/secrets"
)

func TestMain(m *testing.M) {
	if os.Getenv("ATOMICFILE_TEST_CHILD") == "replace" {
		os.Exit(replaceChild(os.Getenv("ATOMICFILE_PATH")))
	}
	os.Exit(m.Run())
}

// version is self-checking: its padding length and checksum must agree
// with its number, so a mix of two versions cannot pass.
type version struct {
	V   int    `json:"v"`
	Pad string `json:"pad"`
	Sum int    `json:"sum"`
}

func makeVersion(v int) version {
	n := 1000 + (v*7919)%200000
	return version{V: v, Pad: strings.Repeat(string(rune('a'+v%26)), n), Sum: v*31 + n}
}

func (x version) ok() bool {
	return len(x.Pad) == 1000+(x.V*7919)%200000 && x.Sum == x.V*31+len(x.Pad) &&
		strings.Count(x.Pad, string(rune('a'+x.V%26))) == len(x.Pad)
}

func replaceChild(path string) int {
	for v := 1; ; v++ {
		b, _ := json.Marshal(makeVersion(v))
		if err := WriteFile(path, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if v == 1 {
			os.Stdout.WriteString("replaced\n") // the parent kills from now on
		}
	}
}

func TestWriteFileReplaces(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.json")
	if err := WriteFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if string(b) != "two" || st.Mode().Perm() != 0o644 {
		t.Fatalf("%q %v", b, st.Mode())
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "missing", "f"), nil, 0o644); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
}

// TestCrashDuringReplace SIGKILLs processes doing atomic replaces at random
// moments; a reader checks the file all along, and after every kill it must
// parse and hold one whole version.
func TestCrashDuringReplace(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 8
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "task-queue.json")
	b, _ := json.Marshal(makeVersion(0))
	if err := WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(when string) int {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		var v version
		if err := json.Unmarshal(data, &v); err != nil || !v.ok() {
			t.Fatalf("%s: file does not hold a whole version (%d bytes): %v", when, len(data), err)
		}
		return v.V
	}
	stop := make(chan struct{})
	readerDone := make(chan error, 1)
	go func() {
		reads := 0
		for {
			select {
			case <-stop:
				readerDone <- nil
				return
			default:
			}
			data, err := os.ReadFile(path)
			var v version
			if err == nil {
				err = json.Unmarshal(data, &v)
			}
			if err != nil || !v.ok() {
				readerDone <- fmt.Errorf("read %d saw a broken file: %v", reads, err)
				return
			}
			reads++
		}
	}()
	for i := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "ATOMICFILE_TEST_CHILD=replace", "ATOMICFILE_PATH="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill at a random moment once the child is replacing the file in
		// a loop, so kills land inside writes, fsyncs and renames.
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: the child never replaced the file: %v", i, err)
		}
		time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if v := check("after kill " + strconv.Itoa(i)); v < 1 {
			t.Fatalf("after kill %d: version %d, the child's replaces did not land", i, v)
		}
	}
	close(stop)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
}

// A replaced record is redacted: a registered secret never reaches it.
func TestWriteFileRedacts(t *testing.T) {
	secrets.Register(secrets.Secret{Name: "RECORD_SECRET", Value: "record-secret-value-2"})
	p := filepath.Join(t.TempDir(), "worker-1.json")
	if err := WriteFile(p, []byte(`{"last_error":"auth failed for record-secret-value-2"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != `{"last_error":"auth failed for [redacted:RECORD_SECRET]"}` {
		t.Fatalf("got %s", b)
	}
}

// WriteRedacted writes what its caller redacted as it is: the caller's
// redaction is the one pass of that write path (a second one would only
// cost, redaction being idempotent).
func TestWriteRedactedWritesAsGiven(t *testing.T) {
	secrets.Register(secrets.Secret{Name: "RECORD_SECRET", Value: "record-secret-value-2"})
	p := filepath.Join(t.TempDir(), "screen.json")
	in := secrets.Redact([]byte(`{"lines":["token record-secret-value-2"]}`))
	if err := WriteRedacted(p, in, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != `{"lines":["token [redacted:RECORD_SECRET]"]}` {
		t.Fatalf("got %s", b)
	}
}
