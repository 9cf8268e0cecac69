package pty

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// holderSpec is what start hands the holder on its stdin.
type holderSpec struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
	Dir     string   `json:"dir"`
	Env     []string `json:"env"`
	// StartedBy says who started the session (a program such as pg-tool).
	StartedBy string `json:"started_by,omitempty"`
	Cols      int    `json:"cols"`
	Rows      int    `json:"rows"`
	// MaxOutput caps output.log in bytes (0: no cap).
	MaxOutput int64 `json:"max_output"`
}

// request and response travel as one JSON line each over the socket.
type request struct {
	Op   string   `json:"op"` // send, resize, screen, wait, ping, state
	Data []byte   `json:"data,omitempty"`
	Keys []string `json:"keys,omitempty"`
	Cols int      `json:"cols,omitempty"`
	Rows int      `json:"rows,omitempty"`
}

type response struct {
	OK     bool                `json:"ok"`
	Error  string              `json:"error,omitempty"`
	Screen *protocol.PtyScreen `json:"screen,omitempty"`
	// State is the holder's live record (op state): what it says about
	// output.log is current even when session.json cannot be written.
	State *protocol.PtySession `json:"state,omitempty"`
}

type holder struct {
	dir    string
	master *os.File
	emu    *emulator
	child  *proc.Child // the program
	log    io.Writer

	mu    sync.Mutex // guards state, out, dirty and the state's file
	state protocol.PtySession
	out   *outputLog
	dirty bool // state changed since session.json was written

	exited chan struct{} // closed once the exit is recorded
}

// heldFlush is how long output that may be the start of a secret is held
// back when no more output follows.
const heldFlush = 50 * time.Millisecond

// Hold is the holder process of a session: it reads its spec from spec,
// starts the program on a new terminal, reports "ok" (or the error) on
// ready, then serves the session until the program ends and its exit is
// recorded. dir must exist and hold no session yet.
func Hold(ctx context.Context, dir string, spec io.Reader, ready io.WriteCloser, logw io.Writer) (err error) {
	defer func() {
		if ready != nil {
			if err != nil {
				fmt.Fprintf(ready, "error: %v\n", err)
			}
			ready.Close()
		}
	}()
	var sp holderSpec
	if err := json.NewDecoder(spec).Decode(&sp); err != nil {
		return fmt.Errorf("read session spec: %w", err)
	}
	dirInfo, err := os.Stat(dir)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(dir, OutputFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, teamdir.FileMode)
	if err != nil {
		return err
	}
	defer logf.Close()
	sock, release, err := socketPath(dir)
	if err != nil {
		return err
	}
	ln, err := net.Listen("unix", sock)
	release()
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()

	path, err := exec.LookPath(sp.Command[0])
	if err != nil {
		return errorf(ErrNotFound, "command not found: %s", sp.Command[0])
	}
	cmd := exec.Command(path, sp.Command[1:]...)
	cmd.Args[0] = sp.Command[0]
	cmd.Dir, cmd.Env = sp.Dir, sp.Env
	master, err := startTerminal(cmd, sp.Cols, sp.Rows)
	if err != nil {
		return fmt.Errorf("start %s: %w", sp.Command[0], err)
	}
	defer master.Close()
	// The program leads its session and process group: its group is
	// signalled only until it is reaped.
	child := proc.Adopt(cmd)
	h := &holder{dir: dir, master: master, child: child, log: logw, exited: make(chan struct{}),
		out: &outputLog{f: logf, max: sp.MaxOutput}}
	hpid, hstart, _ := proc.Self()
	cstart, _ := proc.StartTime(cmd.Process.Pid)
	h.state = protocol.PtySession{
		Type: "session", Name: sp.Name, Status: protocol.PtyRunning, Command: sp.Command, Dir: sp.Dir,
		StartedBy: sp.StartedBy, PID: cmd.Process.Pid, PIDStart: cstart, HolderPID: hpid, HolderStart: hstart,
		Cols: sp.Cols, Rows: sp.Rows, CreatedAt: nowRFC3339(), OutputMax: sp.MaxOutput,
	}
	if err := writeState(dir, &h.state, false); err != nil {
		child.SignalGroup(syscall.SIGKILL)
		child.Wait()
		return err
	}
	// start waits for this "ok": what is not needed to report the program
	// running comes after it. (Output waits in the terminal meanwhile.)
	fmt.Fprintln(ready, "ok")
	ready.Close()
	ready = nil
	// A holder may live for days next to many others: keep its heap small.
	// What it allocates per chunk of output is garbage at once.
	debug.SetGCPercent(25)
	h.emu = newEmulator(sp.Cols, sp.Rows, newReplier(master, h.exited, h.noteError), h.noteError)
	// The output file is redacted as a stream: a key the program prints
	// never reaches it, even split across chunks. What may be the start of
	// one is held back until the next chunk, or briefly when none comes.
	secrets.Register(secrets.FromEnv(sp.Env)...)
	outw := secrets.Default().NewWriter(logSink{h})
	flush := time.AfterFunc(time.Hour, func() { outw.Flush() })
	flush.Stop()
	defer outw.Flush()
	p := newPump(master, 32<<10, func(b []byte) {
		outw.Write(b) // one write per chunk: readers never see half a chunk
		if outw.Held() > 0 {
			flush.Reset(heldFlush)
		}
		h.emu.Write(b)
	})

	go h.serve(ln)
	go h.watchDir(dirInfo)
	go h.flushState()
	// Asked to stop (SIGTERM, SIGINT): hang up on the program, as closing
	// a terminal window does, and record its end as usual.
	stopHangup := context.AfterFunc(ctx, func() { child.SignalGroup(syscall.SIGHUP) })
	defer stopHangup()

	werr := child.Wait()
	exitAt := time.Now()
	p.drain(exitAt)
	flush.Stop()
	outw.Flush()
	code, sig := exitStatus(cmd.ProcessState)
	if cmd.ProcessState == nil {
		code = 1
	}
	h.finish(code, sig, werr)
	return nil
}

// finish records the exit: the last screen, then the state, then wakes
// waiters. The socket goes last, so a client that cannot connect finds the
// exit recorded.
func (h *holder) finish(code int, sig string, werr error) {
	scr := h.emu.snapshot(h.state.Name)
	if b, err := json.Marshal(scr); err == nil {
		// The snapshot's lines are redacted already.
		if err := atomicfile.WriteRedacted(filepath.Join(h.dir, ScreenFile), append(b, '\n'), teamdir.FileMode); err != nil {
			h.noteError("save the final screen: %v", err)
		}
	}
	h.mu.Lock()
	h.state.Status = protocol.PtyExited
	h.state.ExitCode = &code
	if sig != "" {
		h.state.Signal = &sig
	}
	at := nowRFC3339()
	h.state.ExitedAt = &at
	if err := writeState(h.dir, &h.state, true); err != nil {
		fmt.Fprintf(h.log, "pg-pty holder: record exit: %v\n", err)
	}
	h.dirty = false
	h.mu.Unlock()
	close(h.exited)
	os.Remove(filepath.Join(h.dir, SocketFile))
}

// logSink appends to output.log through the holder's outputLog, and
// records in the state what it discarded or could not write. It never
// fails: a lost write is counted, not returned.
type logSink struct{ h *holder }

func (s logSink) Write(b []byte) (int, error) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if s.h.out.write(b) {
		s.h.out.report(&s.h.state)
		s.h.dirty = true
	}
	return len(b), nil
}

// maxErrors bounds the holder errors a state keeps.
const maxErrors = 10

// noteError records a write the holder could not make in the session's
// state (and its log), so status says so.
func (h *holder) noteError(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(h.log, "pg-pty holder: %s\n", msg)
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.state.Errors) < maxErrors {
		h.state.Errors = append(h.state.Errors, msg)
		h.dirty = true
	}
}

// flushState writes session.json when what it says changed (output
// discarded or lost, holder errors), at most once a second. On a full disk
// the write fails too: the holder's live state (op state) still says it.
func (h *holder) flushState() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	logged := false
	for {
		select {
		case <-h.exited:
			return
		case <-t.C:
		}
		h.mu.Lock()
		if h.dirty && h.state.Status == protocol.PtyRunning {
			if err := writeState(h.dir, &h.state, false); err != nil {
				if !logged {
					fmt.Fprintf(h.log, "pg-pty holder: update %s: %v\n", StateFile, err)
					logged = true
				}
			} else {
				h.dirty = false
			}
		}
		h.mu.Unlock()
	}
}

// watchDir ends the program when the session directory goes away or is
// replaced (removed by hand, or a test's temporary directory cleaned up),
// so no holder outlives its session.
func (h *holder) watchDir(orig os.FileInfo) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-h.exited:
			return
		case <-t.C:
			fi, err := os.Stat(h.dir)
			if err != nil || !os.SameFile(fi, orig) {
				h.child.SignalGroup(syscall.SIGKILL)
				return
			}
		}
	}
}

func (h *holder) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go h.handle(c)
	}
}

func (h *holder) handle(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	var req request
	resp := response{OK: true}
	if err := json.Unmarshal(line, &req); err != nil {
		resp = response{Error: "bad request: " + err.Error()}
	} else if err := h.do(&req, &resp); err != nil {
		resp = response{Error: err.Error()}
	}
	b, _ := json.Marshal(resp)
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	c.Write(append(b, '\n'))
}

func (h *holder) do(req *request, resp *response) error {
	switch req.Op {
	case "send":
		data := req.Data
		if len(req.Keys) > 0 {
			k, err := EncodeKeys(req.Keys, h.emu.appCursor())
			if err != nil {
				return err
			}
			data = append(append([]byte(nil), data...), k...)
		}
		select {
		case <-h.exited:
			return ErrNotRunning
		default:
		}
		h.master.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := h.master.Write(data); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return errors.New("the program is not reading its input (terminal input buffer full)")
			}
			return err
		}
		return nil
	case "resize":
		if req.Cols <= 0 || req.Rows <= 0 {
			return fmt.Errorf("invalid size %dx%d", req.Cols, req.Rows)
		}
		h.emu.resize(req.Cols, req.Rows)
		if err := setSize(h.master, req.Cols, req.Rows); err != nil {
			return err
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.state.Cols, h.state.Rows = req.Cols, req.Rows
		return writeState(h.dir, &h.state, false)
	case "screen":
		s := h.emu.snapshot(h.state.Name)
		resp.Screen = &s
		return nil
	case "wait":
		<-h.exited
		return nil
	case "ping":
		return nil
	case "state":
		h.mu.Lock()
		st := h.state
		st.Errors = append([]string(nil), h.state.Errors...)
		h.mu.Unlock()
		resp.State = &st
		return nil
	}
	return fmt.Errorf("unknown op %q", req.Op)
}

// replier passes the emulator's answers to the program's queries (cursor
// position, device attributes) to the terminal without ever blocking the
// output pump: a program that stops reading its input would otherwise
// stall its own output. Answers that do not fit are dropped. A failed
// write is reported once through fail (unless the program has ended,
// which closes the terminal).
type replier struct{ ch chan []byte }

func newReplier(master io.Writer, done <-chan struct{}, fail func(format string, args ...any)) *replier {
	r := &replier{ch: make(chan []byte, 64)}
	go func() {
		failed := false
		for {
			select {
			case b := <-r.ch:
				// EIO: the program has closed the terminal.
				if _, err := master.Write(b); err != nil && !errors.Is(err, syscall.EIO) && !failed {
					select {
					case <-done:
						return
					default:
					}
					failed = true
					fail("answer the program's terminal query: %v", err)
				}
			case <-done:
				return
			}
		}
	}()
	return r
}

func (r *replier) Write(b []byte) (int, error) {
	select {
	case r.ch <- append([]byte(nil), b...):
	default:
	}
	return len(b), nil
}
