package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/powerglide/powerglide/pkg/internal/lazyre"
	"github.com/powerglide/powerglide/pkg/shell"
)

const (
	bashDefaultTimeout = 2 * time.Minute
	bashMaxTimeout     = 10 * time.Minute
	// bashMaxBuffer bounds what a command's output may occupy in memory.
	bashMaxBuffer = 64 << 20
)

var errTimeout = errors.New("timed out")

// fetchRE spots a command line that reaches the network (a URL, a
// download tool, git clone/fetch/pull): its output is untrusted.
var fetchRE = lazyre.Compile(`(?i)\bhttps?://|\b(curl|wget|nc|ncat|telnet|lynx|w3m|aria2c)\b|\bgit\s+(clone|fetch|pull)\b`)

// fetches reports whether a bash call's command reaches the network.
func fetches(input json.RawMessage) bool {
	var in struct {
		Command string `json:"command"`
	}
	return json.Unmarshal(input, &in) == nil && fetchRE().MatchString(in.Command)
}

var bashTool = &Tool{
	Name:      "bash",
	Untrusted: fetches,
	Description: `Run a shell command with bash -c in the workspace and return its combined stdout and stderr followed by its exit code.
Use it for builds, tests, git, and programs; prefer read/grep/glob/ls to inspect files and edit/write to change them.
The working directory starts at the workspace root (or "workdir", relative to the root); in a long-running session a "cd" carries over to the next call (not when the command ends by exec-ing another program).
Timeout: 120000 ms by default, at most 600000 ms; on timeout the command and every process it started are killed.
Stdin is empty: interactive programs do not work here, use the term_* tools for them. Background processes (cmd &) are ended when the command returns; start servers with term_start. Long output is cut to its head and tail.`,
	Schema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "description": "The command line, run with bash -c."},
    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "Time limit in milliseconds (default 120000, max 600000)."},
    "workdir": {"type": "string", "description": "Directory to run in, relative to the workspace root. Default: the current directory of this session."},
    "description": {"type": "string", "description": "A few words saying what the command does (for logs)."}
  },
  "required": ["command"],
  "additionalProperties": false
}`),
	Run: runBash,
}

type bashInput struct {
	Command     string  `json:"command"`
	TimeoutMS   int64   `json:"timeout_ms"`
	Workdir     *string `json:"workdir"`
	Description string  `json:"description"`
}

// lockedBuffer collects the combined output of a command and its children.
type lockedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	dropped int
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := bashMaxBuffer - b.buf.Len(); room < len(p) {
		if room > 0 {
			b.buf.Write(p[:room])
		}
		b.dropped += len(p) - max(room, 0)
		return len(p), nil
	}
	return b.buf.Write(p)
}

// ReadFrom copies a command's output pipe in (os/exec's io.Copy calls
// it) through a pooled buffer: io.Copy would allocate 32 KB per command.
func (b *lockedBuffer) ReadFrom(r io.Reader) (int64, error) {
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{b}, r, *buf)
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if b.dropped > 0 {
		s += fmt.Sprintf("\n[%d more bytes of output were discarded]\n", b.dropped)
	}
	return s
}

func runBash(ctx context.Context, s *Session, raw json.RawMessage) (string, error) {
	var in bashInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return "", err
	}
	timeout := bashDefaultTimeout
	if in.TimeoutMS > 0 {
		timeout = min(time.Duration(in.TimeoutMS)*time.Millisecond, bashMaxTimeout)
	}
	s.mu.Lock()
	cwd := s.cwd
	s.mu.Unlock()
	if in.Workdir != nil {
		r, err := s.rel(*in.Workdir)
		if err != nil {
			return "", err
		}
		fi, err := s.root.Stat(r)
		if err != nil {
			return "", s.pathErr(*in.Workdir, err)
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("workdir %s is not a directory", *in.Workdir)
		}
		cwd = r
	} else if _, err := s.root.Stat(cwd); err != nil {
		cwd = "." // the session's directory vanished: start over at the root
	}
	dir := filepath.Join(s.rootPath, cwd)

	// The final working directory comes back on a file descriptor, so
	// "cd" carries over: written after the command (which may have set an
	// EXIT trap of its own), and by an EXIT trap for a command that calls
	// "exit N", whichever comes first. A command that ends in "exec prog"
	// replaces the shell, so its cd is lost (the description says so).
	// The descriptor is an anonymous memory file (memfd), not a pipe: a
	// daemon the command leaves behind must not hold the call open; and
	// no file in TMPDIR: the command never sees it, and a call costs no
	// file creation, write-back and unlink on a disk (cwdChannel falls
	// back to one, unlinked at once, where memfd_create is refused).
	script := in.Command
	var cwdOut *os.File
	if s.opts.PersistCwd && in.Workdir == nil && mayChangeDir(in.Command) {
		f, err := cwdChannel()
		if err != nil {
			return "", fmt.Errorf("bash: working directory channel: %w", err)
		}
		cwdOut = f
		defer cwdOut.Close()
		// It arrives as fd 3 and moves out of the way of the command's
		// own use of low descriptors (exec 3>file), to three descriptors
		// from 10 up. The command may open its own files at those numbers
		// too (exec 10>file): the directory is written only through a
		// descriptor that still shares its file with another of the
		// three, so never into a file of the command's, and one such
		// reopening still lets the cd carry over.
		save := `[ -n "${__pg_saved-}" ] || { __pg_saved=1; __pg_fd=; ` +
			`if [ /dev/fd/"${__pg_c1-}" -ef /dev/fd/"${__pg_c2-}" ]; then __pg_fd=$__pg_c1; ` +
			`elif [ /dev/fd/"${__pg_c2-}" -ef /dev/fd/"${__pg_c3-}" ]; then __pg_fd=$__pg_c2; ` +
			`elif [ /dev/fd/"${__pg_c1-}" -ef /dev/fd/"${__pg_c3-}" ]; then __pg_fd=$__pg_c1; fi; ` +
			`[ -z "$__pg_fd" ] || pwd -P >&"$__pg_fd"; } 2>/dev/null`
		// The blank line ends a command left open by a final backslash.
		script = "exec {__pg_c1}>&3 {__pg_c2}>&3 {__pg_c3}>&3 3>&-\ntrap " + shell.Quote(save) + " EXIT\n" + in.Command +
			"\n\n__pg_status=$?; " + save + "; exit $__pg_status\n"
	}
	out := &lockedBuffer{}
	r := run{timeout: timeout, dir: dir, env: s.env(), stdout: out, stderr: out}
	if cwdOut != nil {
		r.extra = []*os.File{cwdOut}
	}
	code, runErr := s.runGroup(ctx, r, "bash", "-c", script)
	var newDir string
	if cwdOut != nil {
		b, _ := io.ReadAll(io.NewSectionReader(cwdOut, 0, 1<<20))
		newDir = strings.TrimSpace(string(b))
	}

	text := out.String()
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if cwdOut != nil && runErr == nil {
		if newDir != "" {
			if r, err := filepath.Rel(s.rootPath, newDir); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
				s.mu.Lock()
				s.cwd = r
				s.mu.Unlock()
			} else {
				text += fmt.Sprintf("[the command left the workspace (cwd %s); the next call starts at the workspace root]\n", newDir)
				s.mu.Lock()
				s.cwd = "."
				s.mu.Unlock()
			}
		}
	}
	switch {
	case errors.Is(runErr, errTimeout):
		text += fmt.Sprintf("[timed out after %s; the command and its child processes were killed]\n", timeout)
		return text, fmt.Errorf("command timed out after %s", timeout)
	case runErr != nil:
		return text, runErr
	case code != 0:
		text += fmt.Sprintf("[exit code: %d]\n", code)
		return text, fmt.Errorf("command exited with code %d", code)
	}
	text += "[exit code: 0]\n"
	return text, nil
}

// dirChangeRE finds what may change bash's working directory in a command
// line: cd (also in builtin cd, command cd, CDPATH, or a function that
// calls it), pushd, popd, and what runs text the line does not show: a
// sourced file (source, or "." as a command word) and eval.
var dirChangeRE = lazyre.Compile(`cd|pushd|popd|source|eval|(^|[\s;&|(){}!])\.[ \t]`)

// mayChangeDir reports whether a command may leave bash in another working
// directory, so that the call needs the channel that brings it back. Most
// calls cannot, and run as plain bash -c: the wrapper that reports the
// directory costs a bash builtin command about 0.3 ms, and an external
// command 0.75 ms more (bash no longer execs it in place of itself, but
// forks it and waits). A line that reaches cd only through text it
// builds at run time (a=c; ${a}d dir) is run plainly: its cd does not
// carry over.
func mayChangeDir(command string) bool { return dirChangeRE().MatchString(command) }

// memfdCreate and openTmpfile are variables for the tests.
var (
	memfdCreate = unix.MemfdCreate
	openTmpfile = func(dir string) (int, error) {
		return unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	}
)

// cwdChannel opens the file the working directory comes back on: a memfd,
// or where memfd_create is refused (a seccomp profile that denies it, a
// kernel before 3.17), a file in TMPDIR that never has a name (O_TMPFILE),
// or where the file system cannot make one, a temporary file removed as
// soon as it is open: no command sees it by name.
func cwdChannel() (*os.File, error) {
	fd, err := memfdCreate("pg-tool-cwd", unix.MFD_CLOEXEC)
	if err == nil {
		return os.NewFile(uintptr(fd), "pg-tool-cwd"), nil
	}
	if fd, terr := openTmpfile(os.TempDir()); terr == nil {
		return os.NewFile(uintptr(fd), "pg-tool-cwd"), nil
	}
	f, terr := os.CreateTemp("", "pg-tool-cwd-*")
	if terr != nil {
		return nil, fmt.Errorf("memfd: %v; temporary file: %w", err, terr)
	}
	if rerr := os.Remove(f.Name()); rerr != nil {
		f.Close()
		return nil, fmt.Errorf("memfd: %v; temporary file: %w", err, rerr)
	}
	return f, nil
}
