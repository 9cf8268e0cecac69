package loop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// fillLimit is the file size limit (RLIMIT_FSIZE) under which fillSession
// appends: a write past it fails with EFBIG (Go ignores SIGXFSZ), as on a
// full disk.
const fillLimit = 10000

// fillSession, in a child process (TestMain), appends records of about
// 1 KB to session dir's memory under fillLimit until one fails, appends
// once more, and prints both errors.
func fillSession(dir string) {
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: fillLimit, Max: fillLimit}); err != nil {
		fmt.Println("setrlimit:", err)
		os.Exit(1)
	}
	s := &Session{Dir: dir}
	if err := s.Lock(); err != nil {
		fmt.Println("lock:", err)
		os.Exit(1)
	}
	for i := 0; i < 100; i++ {
		m := text(protocol.RoleUser, fmt.Sprintf("%d %s", i, strings.Repeat("x", 1000)))
		if err := s.Append(MemoryRecord{Type: MemMessage, Task: "task-1", Message: m}); err != nil {
			fmt.Println(err)
			fmt.Println(s.Append(MemoryRecord{Type: MemMessage, Task: "task-1", Message: text(protocol.RoleUser, "small")}))
			os.Exit(0)
		}
	}
	fmt.Println("no write failed")
	os.Exit(1)
}

// A write that fails (here past a file size limit, as on a full disk)
// leaves no part of its record in the memory, and no record is appended
// after it: a reader sees whole records, and no hole.
func TestAppendIsAllOrNothing(t *testing.T) {
	home := t.TempDir()
	s, err := CreateSession(home, home, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.Append(MemoryRecord{Type: MemTask, Task: "task-1", Status: "started", TS: time.Now()})
	s.Close()
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), "PGLOOP_FILL_SESSION="+s.Dir)
	out, err := child.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 2 || !strings.Contains(lines[0], "append session memory: write") || !strings.Contains(lines[0], "file too large") || lines[1] != lines[0] {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	mem, err := os.ReadFile(filepath.Join(s.Dir, MemoryFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(mem) == 0 || len(mem) > fillLimit || mem[len(mem)-1] != '\n' {
		t.Fatalf("memory of %d bytes, ending %q", len(mem), mem[max(len(mem)-20, 0):])
	}
	for i, l := range bytes.Split(bytes.TrimSuffix(mem, []byte("\n")), []byte("\n")) {
		var rec MemoryRecord
		if err := json.Unmarshal(l, &rec); err != nil {
			t.Fatalf("line %d is no record: %v", i+1, err)
		}
		if want := fmt.Sprintf("%d x", i-1); i > 0 && !strings.HasPrefix(rec.Message.Content.Text(), want) {
			t.Fatalf("line %d: %.10q, want %q: a record is missing before it", i+1, rec.Message.Content.Text(), want)
		}
	}
	rp, err := ReadMemory(bytes.NewReader(mem))
	if err != nil || len(rp.Warnings) != 0 || rp.Current == nil || len(rp.Conv) < 5 {
		t.Fatalf("replay: %v %+v", err, rp)
	}
}

// The driver of a memory that ends in part of a record (a kill mid-write,
// or a full disk under an older version) cuts it off before it appends:
// the records it writes follow the last whole one. A line that is no
// record mid-file is left out with a warning.
func TestTornMemory(t *testing.T) {
	home := t.TempDir()
	s, err := CreateSession(home, home, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.Append(MemoryRecord{Type: MemTask, Task: "task-1", Status: "started", TS: time.Now()},
		MemoryRecord{Type: MemMessage, Task: "task-1", Message: text(protocol.RoleUser, "one"), TS: time.Now()})
	s.Close()
	path := filepath.Join(s.Dir, MemoryFile)
	whole, _ := os.ReadFile(path)
	torn := `{"type":"message","task":"task-1","message":{"role":"assistant","con`
	os.WriteFile(path, append(append([]byte(nil), whole...), torn...), 0o600)

	rp, err := ReadMemory(strings.NewReader(string(whole) + torn))
	if err != nil || len(rp.Conv) != 1 || len(rp.Warnings) != 1 || !strings.Contains(rp.Warnings[0], "the last record (line 3) is cut short") {
		t.Fatalf("replay of a torn tail: %v %+v", err, rp)
	}
	s, err = OpenSession(home, s.Info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Lock(); err != nil {
		t.Fatal(err)
	}
	if s.Torn != int64(len(torn)) {
		t.Errorf("cut %d bytes, want %d", s.Torn, len(torn))
	}
	if err := s.Append(MemoryRecord{Type: MemMessage, Task: "task-1", Message: text(protocol.RoleAssistant, "two"), TS: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	mem, _ := os.ReadFile(path)
	rp, err = ReadMemory(bytes.NewReader(mem))
	if err != nil || len(rp.Conv) != 2 || rp.Conv[1].Content.Text() != "two" || len(rp.Warnings) != 0 {
		t.Fatalf("after the cut: %v %+v\n%s", err, rp, mem)
	}

	// Mid-file, as an older version left it after a failed write.
	rp, err = ReadMemory(strings.NewReader(string(whole) + torn + "\n" + string(whole[bytes.IndexByte(whole, '\n')+1:])))
	if err != nil || len(rp.Conv) != 2 || len(rp.Warnings) != 1 || !strings.Contains(rp.Warnings[0], "line 3 is not a whole record: left out; records written after a failed write may be missing") {
		t.Fatalf("replay of a line mid-file: %v %+v", err, rp)
	}
}
