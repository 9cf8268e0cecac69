package pty

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"golang.org/x/sys/unix"
)

func startCapped(t *testing.T, s Store, name string, maxOut int64, cmd ...string) *protocol.PtySession {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Start(StartOptions{Name: name, Command: cmd, Dir: t.TempDir(), Env: append(os.Environ(), "TERM=xterm", holderEnv+"=1"),
		Cols: 80, Rows: 24, MaxOutput: maxOut, Holder: HolderExec{Path: exe, Args: []string{exe}}})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	return st
}

// until polls the session's live state until cond holds. It gives up only
// when the session has stopped making progress (no new output and no
// change of state for a while), never on a total budget: a loaded machine
// writes slowly, but it still writes.
func until(t *testing.T, s Store, name, what string, cond func(*protocol.PtySession) bool) *protocol.PtySession {
	t.Helper()
	const stall = 30 * time.Second
	var last protocol.PtySession
	moved := time.Now()
	for {
		st, err := s.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		s.Probe(context.Background(), st)
		if cond(st) {
			return st
		}
		if st.OutputBytes != last.OutputBytes || st.OutputLost != last.OutputLost || st.Status != last.Status {
			last, moved = *st, time.Now()
		} else if time.Since(moved) > stall {
			t.Fatalf("%s: never %s (no progress for %v); state %+v", name, what, stall, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// diskBytes is what a file occupies on disk.
func diskBytes(t *testing.T, p string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// A writer of a fixed amount (1 MiB of "y\n", 1.5 MiB through the
// terminal's \r\n) fills output.log far past its cap, then stops: the cap
// keeps what is on disk near it while offsets keep counting, status says
// so, and a read from 0 skips what was discarded. Before, output.log grew
// without limit. The amount is fixed, not a time, so a slow machine only
// takes longer.
func TestOutputLogCap(t *testing.T) {
	s := newStore(t)
	const maxOut = 256 << 10
	const wrote = 3 << 19 // what the pty turns 1 MiB of "y\n" into
	startCapped(t, s, "yes", maxOut, "sh", "-c", "yes | head -c 1048576; exec cat")
	st := until(t, s, "yes", "wrote 1.5 MiB", func(st *protocol.PtySession) bool { return st.OutputBytes >= wrote })
	if st.OutputMax != maxOut || st.OutputStart <= 0 || st.OutputStart > st.OutputBytes || st.OutputBytes != wrote {
		t.Errorf("status: output_max %d, output_start %d, output_bytes %d (want %d)", st.OutputMax, st.OutputStart, st.OutputBytes, wrote)
	}
	log := filepath.Join(s.Dir("yes"), OutputFile)
	slack := int64(max(maxOut/8, 64<<10))
	if used := diskBytes(t, log); used > maxOut+slack+64<<10 {
		t.Errorf("output.log occupies %d bytes on disk, cap %d", used, maxOut)
	}
	out, err := s.Read(context.Background(), "yes", ReadOptions{Since: 0, HasSince: true, Max: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if out.Skipped < st.OutputStart || out.Offset != out.Skipped || strings.ContainsRune(out.Data, 0) || !strings.Contains(out.Data, "y\r\ny\r\n") {
		t.Errorf("read from 0: offset %d, skipped %d (output_start %d), data %q", out.Offset, out.Skipped, st.OutputStart, out.Data[:min(len(out.Data), 40)])
	}
	// A waiting read that starts in the discarded part finds later output.
	out, err = s.Read(context.Background(), "yes", ReadOptions{Since: 1, HasSince: true, Wait: regexp.MustCompile(`y\r\ny`), Timeout: 10 * time.Second})
	if err != nil || !out.Matched || out.Offset < st.OutputStart {
		t.Errorf("wait from offset 1: %v, %+v", err, out)
	}
	if _, err := s.Kill(context.Background(), "yes", syscall.SIGKILL, 0); err != nil {
		t.Fatal(err)
	}
	end := waitEnd(t, s, "yes")
	if end.OutputStart <= 0 || end.OutputMax != maxOut {
		t.Errorf("the recorded end lost the cap: %+v", end)
	}
	scr, err := s.Screen(context.Background(), "yes")
	if err != nil || !strings.HasPrefix(scr.Lines[0], "y") {
		t.Errorf("screen after the end: %v %+v", err, scr)
	}
}

// A holder that cannot write output.log (here a file size limit set on it:
// writes fail with EFBIG, as on a full disk they fail with ENOSPC) goes on,
// and the session says what was lost: status (live from the holder, and
// session.json at the end) and read. The final screen.json that cannot be
// written either is reported too. Before, the output was lost silently.
func TestOutputWriteErrorsReported(t *testing.T) {
	s := newStore(t)
	st := startCapped(t, s, "full", 0, "sh", "-c", "read go; i=0; while [ $i -lt 300 ]; do echo line $i of an output long enough to fill every row of the screen to its brim; i=$((i+1)); done; read end")
	const limit = 1500
	if err := unix.Prlimit(st.HolderPID, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: limit}, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	send(t, s, "full", "go\n")
	live := until(t, s, "full", "reported lost output", func(st *protocol.PtySession) bool { return st.OutputLost > 0 })
	if !strings.Contains(live.OutputError, "write output.log: file too large") {
		t.Errorf("output_error = %q", live.OutputError)
	}
	out, err := s.Read(context.Background(), "full", ReadOptions{Since: 0, HasSince: true})
	if err != nil || out.OutputLost == 0 || len(out.Data) > limit {
		t.Errorf("read: %v, %d bytes, output_lost %d", err, len(out.Data), out.OutputLost)
	}
	send(t, s, "full", "\n")
	end := waitEnd(t, s, "full")
	if end.OutputLost == 0 || end.OutputError == "" {
		t.Errorf("session.json does not record the loss: %+v", end)
	}
	if len(end.Errors) == 0 || !strings.Contains(end.Errors[0], "save the final screen") {
		t.Errorf("session.json does not record the unsaved screen: %q", end.Errors)
	}
}
