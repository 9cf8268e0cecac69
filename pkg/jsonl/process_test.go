package jsonl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test binary doubles as the child process of the concurrency tests.
func TestMain(m *testing.M) {
	if os.Getenv("JSONL_TEST_CHILD") == "append" {
		os.Exit(appendChild())
	}
	os.Exit(m.Run())
}

type rec struct {
	W   int    `json:"w"`
	N   int    `json:"n"`
	Pad string `json:"pad"`
}

func appendChild() int {
	path := os.Getenv("JSONL_PATH")
	w, _ := strconv.Atoi(os.Getenv("JSONL_WORKER"))
	n, _ := strconv.Atoi(os.Getenv("JSONL_LINES"))
	for i := range n {
		// Some lines are larger than PIPE_BUF, so atomicity does not come
		// from the kernel's small-write guarantee.
		pad := strings.Repeat("x", (i*37)%97)
		if i%500 == 0 {
			pad = strings.Repeat("y", 9000)
		}
		if err := Append(path, rec{W: w, N: i, Pad: pad}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// TestConcurrentAppendProcesses: 8 processes each append 10,000 lines to
// one journal under the lock, while a reader follows it from before it
// exists. Every line must be whole, present once, and seen once.
func TestConcurrentAppendProcesses(t *testing.T) {
	procs, lines := 8, 10000
	if testing.Short() {
		lines = 1000
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seen := make(map[[2]int]int)
	var followErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f := Follow(path, FollowOptions{FromStart: true, Poll: 2 * time.Millisecond})
		defer f.Close()
		for len(seen) < procs*lines {
			line, err := f.Next(ctx)
			if err != nil {
				followErr = fmt.Errorf("after %d lines: %w", len(seen), err)
				return
			}
			var r rec
			if err := json.Unmarshal(line, &r); err != nil {
				followErr = fmt.Errorf("torn line seen by the follower: %q", line)
				return
			}
			seen[[2]int{r.W, r.N}]++
		}
	}()

	var cmds []*exec.Cmd
	for w := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "JSONL_TEST_CHILD=append", "JSONL_PATH="+path,
			"JSONL_WORKER="+strconv.Itoa(w), "JSONL_LINES="+strconv.Itoa(lines))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	wg.Wait()
	if followErr != nil {
		t.Fatal(followErr)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("follower saw %v %d times", k, n)
		}
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte("\n")) {
		t.Fatal("file does not end with a newline")
	}
	all := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	if len(all) != procs*lines {
		t.Fatalf("%d lines in the file, want %d", len(all), procs*lines)
	}
	inFile := map[[2]int]bool{}
	last := map[int]int{}
	for i, l := range all {
		var r rec
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("line %d torn: %q", i+1, l)
		}
		if inFile[[2]int{r.W, r.N}] {
			t.Fatalf("line %v twice", r)
		}
		inFile[[2]int{r.W, r.N}] = true
		// Each writer's lines keep their order.
		if n, ok := last[r.W]; ok && r.N != n+1 {
			t.Fatalf("writer %d: line %d after %d", r.W, r.N, n)
		}
		last[r.W] = r.N
	}
}
