package pty

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// HolderExec is how start runs the holder: Path with Args (Args[0] is the
// program name it sees); the session directory is appended.
type HolderExec struct {
	Path string
	Args []string
}

// StartOptions describe a new session.
type StartOptions struct {
	Name    string
	Command []string
	Dir     string   // the program's working directory
	Env     []string // the program's environment
	// StartedBy says who started the session, when a program did (e.g.
	// "pg-tool serve (pid 4242)"); pg-pty list shows it.
	StartedBy string
	Cols      int
	Rows      int
	// MaxOutput caps output.log in bytes: older output is discarded
	// (0: DefaultMaxOutput; negative: no cap).
	MaxOutput int64
	Holder    HolderExec
}

// Start creates the session directory, starts a detached holder (its own
// session, so it outlives the caller and its terminal) and waits until the
// program runs.
func (s Store) Start(o StartOptions) (*protocol.PtySession, error) {
	if err := validName(o.Name); err != nil {
		return nil, err
	}
	if len(o.Command) == 0 {
		return nil, errorf(ErrBadInput, "no command given")
	}
	if o.Cols <= 0 || o.Rows <= 0 || o.Cols > 10000 || o.Rows > 10000 {
		return nil, errorf(ErrBadInput, "invalid terminal size %dx%d", o.Cols, o.Rows)
	}
	if _, err := exec.LookPath(o.Command[0]); err != nil {
		return nil, errorf(ErrNotFound, "command not found: %s", o.Command[0])
	}
	if err := os.MkdirAll(s.Root, teamdir.DirMode); err != nil {
		return nil, err
	}
	dir := s.Dir(o.Name)
	if err := os.Mkdir(dir, teamdir.DirMode); err != nil {
		if errors.Is(err, os.ErrExist) {
			status := "unknown"
			if st, err := s.Load(o.Name); err == nil {
				status = st.Status
			}
			return nil, errorf(ErrExists, "session %s already exists (%s): pick another name, or end it with pg-pty kill and remove it with pg-pty clean", o.Name, status)
		}
		return nil, err
	}
	st, err := s.spawn(dir, o)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return st, nil
}

func (s Store) spawn(dir string, o StartOptions) (*protocol.PtySession, error) {
	maxOut := o.MaxOutput
	switch {
	case maxOut == 0:
		maxOut = DefaultMaxOutput
	case maxOut < 0:
		maxOut = 0
	}
	spec, err := json.Marshal(holderSpec{Name: o.Name, Command: o.Command, Dir: o.Dir, Env: o.Env, StartedBy: o.StartedBy, Cols: o.Cols, Rows: o.Rows, MaxOutput: maxOut})
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, HolderLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, teamdir.FileMode)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer readyR.Close()
	cmd := exec.Command(o.Holder.Path)
	cmd.Args = append(append([]string(nil), o.Holder.Args...), dir)
	cmd.Stdin = bytes.NewReader(spec)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.Env = o.Env
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		readyW.Close()
		return nil, fmt.Errorf("start holder: %w", err)
	}
	readyW.Close()
	go cmd.Wait() // reap it if this process lives on (tests)
	readyR.SetReadDeadline(time.Now().Add(30 * time.Second))
	msg, _ := bufio.NewReader(readyR).ReadString('\n')
	line := strings.TrimSpace(msg)
	if line != "ok" {
		cmd.Process.Kill()
		if line == "" {
			b, _ := os.ReadFile(filepath.Join(dir, HolderLog))
			line = "holder exited without starting the program: " + strings.TrimSpace(string(b))
		}
		line = strings.TrimPrefix(line, "error: ")
		if strings.HasPrefix(line, ErrNotFound.Error()) {
			return nil, errorf(ErrNotFound, "%s", line)
		}
		return nil, fmt.Errorf("start session %s: %s", o.Name, line)
	}
	return s.Load(o.Name)
}

// running loads a session and fails unless its program is running.
func (s Store) running(name string) (*protocol.PtySession, error) {
	st, err := s.Load(name)
	if err != nil {
		return nil, err
	}
	if st.Status != protocol.PtyRunning {
		return st, errorf(ErrNotRunning, "session %s is not running (%s)", name, describeEnd(st))
	}
	return st, nil
}

func describeEnd(st *protocol.PtySession) string {
	switch {
	case st.Status == protocol.PtyDead:
		return "dead: its holder process is gone"
	case st.Signal != nil:
		return "killed by " + *st.Signal
	case st.ExitCode != nil:
		return "exited with code " + strconv.Itoa(*st.ExitCode)
	}
	return st.Status
}

// Default limits of Store.CallTimeout and Store.ProbeTimeout.
const (
	DefaultCallTimeout  = 10 * time.Second
	DefaultProbeTimeout = 3 * time.Second
)

// call sends one request to a session's holder and reads the answer,
// within the store's CallTimeout (all but wait).
func (s Store) call(ctx context.Context, dir string, st *protocol.PtySession, req request) (*response, error) {
	return callWithin(ctx, dir, st, req, cmp.Or(s.CallTimeout, DefaultCallTimeout))
}

func callWithin(ctx context.Context, dir string, st *protocol.PtySession, req request, timeout time.Duration) (*response, error) {
	c, err := dial(dir, min(timeout, 5*time.Second))
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, errorf(ErrUnresponsive, "holder pid %d not responding", st.HolderPID)
		}
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if req.Op != "wait" {
		c.SetDeadline(time.Now().Add(timeout))
	}
	b, _ := json.Marshal(req)
	_, err = c.Write(append(b, '\n'))
	var line []byte
	if err == nil {
		line, err = bufio.NewReader(c).ReadBytes('\n')
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, errorf(ErrUnresponsive, "holder pid %d not responding", st.HolderPID)
		}
		return nil, fmt.Errorf("holder closed the connection: %w", err)
	}
	var resp response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("bad answer from holder: %w", err)
	}
	if !resp.OK {
		return nil, errors.New(resp.Error)
	}
	return &resp, nil
}

// Probe asks a running session's holder whether it is alive and marks the
// session unresponsive when it does not answer in time (stopped, hung).
// Any answer counts, also an error from a holder that knows no "state".
// The holder's answer brings what it knows of output.log now (discarded,
// lost, write errors), which session.json may not say yet, or not at all
// on a full disk.
func (s Store) Probe(ctx context.Context, st *protocol.PtySession) {
	if st.Status != protocol.PtyRunning {
		return
	}
	resp, err := callWithin(ctx, s.Dir(st.Name), st, request{Op: "state"}, cmp.Or(s.ProbeTimeout, DefaultProbeTimeout))
	if errors.Is(err, ErrUnresponsive) {
		st.Status = protocol.PtyUnresponsive
	}
	if err == nil {
		mergeLive(st, resp.State)
	}
}

// mergeLive takes what a holder's live state says about the output.
func mergeLive(st, live *protocol.PtySession) {
	if live != nil {
		st.OutputMax, st.OutputStart, st.OutputLost, st.OutputError, st.Errors = live.OutputMax, live.OutputStart, live.OutputLost, live.OutputError, live.Errors
	}
}

// Send types text and then keys (names as for EncodeKey) into a session.
func (s Store) Send(ctx context.Context, name string, text []byte, keys []string) error {
	if _, err := EncodeKeys(keys, false); err != nil {
		return errorf(ErrBadInput, "%v", err)
	}
	if len(text) == 0 && len(keys) == 0 {
		return errorf(ErrBadInput, "nothing to send: give TEXT or --keys")
	}
	st, err := s.running(name)
	if err != nil {
		return err
	}
	_, err = s.call(ctx, s.Dir(name), st, request{Op: "send", Data: text, Keys: keys})
	if err != nil {
		return s.afterCall(name, "send to", err)
	}
	return nil
}

// afterCall explains a failed request: most often the program just ended.
func (s Store) afterCall(name, what string, err error) error {
	if st, lerr := s.Load(name); lerr == nil && st.Status != protocol.PtyRunning {
		return errorf(ErrNotRunning, "session %s is not running (%s)", name, describeEnd(st))
	}
	return fmt.Errorf("%s session %s: %w", what, name, err)
}

// Resize changes a running session's terminal size.
func (s Store) Resize(ctx context.Context, name string, cols, rows int) (*protocol.PtySession, error) {
	if cols <= 0 || rows <= 0 || cols > 10000 || rows > 10000 {
		return nil, errorf(ErrBadInput, "invalid terminal size %dx%d", cols, rows)
	}
	st, err := s.running(name)
	if err != nil {
		return nil, err
	}
	if _, err := s.call(ctx, s.Dir(name), st, request{Op: "resize", Cols: cols, Rows: rows}); err != nil {
		return nil, s.afterCall(name, "resize", err)
	}
	return s.Load(name)
}

// Screen renders a session's screen: the holder's emulator while the
// program runs, the screen saved at its end afterwards, or else a replay
// of output.log.
func (s Store) Screen(ctx context.Context, name string) (*protocol.PtyScreen, error) {
	st, err := s.Load(name)
	if err != nil {
		return nil, err
	}
	dir := s.Dir(name)
	if st.Status == protocol.PtyRunning {
		resp, err := s.call(ctx, dir, st, request{Op: "screen"})
		if err == nil && resp.Screen != nil {
			return resp.Screen, nil
		}
		if errors.Is(err, ErrUnresponsive) {
			return nil, fmt.Errorf("screen of session %s: %w", name, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, ScreenFile)); err == nil {
		var scr protocol.PtyScreen
		if err := json.Unmarshal(b, &scr); err == nil {
			return &scr, nil
		}
	}
	f, err := os.Open(filepath.Join(dir, OutputFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Output the cap discarded is a hole: replay what is kept.
	if _, err := f.Seek(max(st.OutputStart, dataFrom(f, 0)), io.SeekStart); err != nil {
		return nil, err
	}
	scr, err := renderScreen(name, st.Cols, st.Rows, f)
	return &scr, err
}

// ReadOptions select what Read returns.
type ReadOptions struct {
	Since    int64 // byte offset into output.log
	HasSince bool  // without it, reading starts where the last read ended
	// Wait, when set, blocks until the output from the offset matches; the
	// data then ends with the match (expect-style), so the next read starts
	// right after it.
	Wait    *regexp.Regexp
	Timeout time.Duration // for Wait; 0 looks at the output once
	Max     int           // most bytes to return; 0 means no limit
	// Plain returns the text without terminal escape sequences (see
	// package termtext), and Wait matches that text: a pattern written from
	// what a reader saw matches. Offsets stay offsets into output.log.
	Plain bool
}

// pollInterval is how often a waiting read looks at output.log.
const pollInterval = 20 * time.Millisecond

// Read returns a session's output from an offset. With Wait it returns
// ErrNoMatch when the program ended without a match and
// context.DeadlineExceeded on timeout, with the output read so far. Output
// the cap discarded is skipped (the record's skipped says how much).
func (s Store) Read(ctx context.Context, name string, o ReadOptions) (*protocol.PtyOutput, error) {
	st, err := s.Load(name)
	if err != nil {
		return nil, err
	}
	dir := s.Dir(name)
	if st.Status == protocol.PtyRunning {
		// What the holder knows now of discarded and lost output; a
		// holder that does not answer soon leaves session.json's word.
		if resp, err := callWithin(ctx, dir, st, request{Op: "state"}, time.Second); err == nil {
			mergeLive(st, resp.State)
		}
	}
	since := o.Since
	if !o.HasSince {
		since = readCursor(dir)
	}
	if since < 0 {
		return nil, errorf(ErrBadInput, "negative offset %d", since)
	}
	f, err := os.Open(filepath.Join(dir, OutputFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := &protocol.PtyOutput{Type: "output", Name: name, Offset: since, NextOffset: since, OutputLost: st.OutputLost}
	var buf []byte
	var deadline time.Time
	if o.Wait != nil {
		// A zero timeout looks once.
		deadline = time.Now().Add(max(o.Timeout, 0))
	}
	lastCheck := time.Now()
	running := st.Status == protocol.PtyRunning
	scanned := 0
	var text []byte // with Plain: the text of buf[:mapped]
	mapped := 0
	for {
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if since > fi.Size() {
			return nil, errorf(ErrBadInput, "offset %d is past the end of the output (%d bytes)", since, fi.Size())
		}
		end := out.Offset + int64(len(buf))
		if fi.Size() > end {
			if kept := max(st.OutputStart, dataFrom(f, end)); kept > end {
				// The cap discarded output this read had not reached yet
				// (a reader far behind a fast program): go on from what
				// is kept.
				out.Offset, buf, scanned, end = kept, nil, 0, kept
				text, mapped = text[:0], 0
				out.Skipped = kept - since
			}
			chunk := make([]byte, max(fi.Size()-end, 0))
			n, err := f.ReadAt(chunk, end)
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			buf = append(buf, chunk[:n]...)
		}
		fresh := len(buf) != scanned || scanned == 0
		scanned = len(buf)
		if o.Wait == nil {
			data := buf
			if o.Max > 0 && len(data) > o.Max {
				data = trimRuneEnd(data[:o.Max])
			} else if running {
				data = trimRuneEnd(data)
			}
			return s.finishRead(dir, out, data, o.Plain, running, true)
		}
		if fresh {
			hay := buf
			if o.Plain {
				// Only the new output is turned into text each time.
				var n int
				text, n = termtext.Append(text, buf[mapped:])
				mapped += n
				hay = text
			}
			if loc := o.Wait.FindIndex(hay); loc != nil {
				end := loc[1]
				if o.Plain {
					end = termtext.RawEnd(buf, end)
				}
				out.Matched = true
				return s.finishRead(dir, out, buf[:end], o.Plain, false, true)
			}
		}
		if !running {
			out, _ = s.finishRead(dir, out, buf, o.Plain, false, false)
			if st.Status == protocol.PtyDead {
				return out, errorf(ErrNoMatch, "session %s died before /%s/ appeared: its holder process is gone", name, o.Wait)
			}
			return out, errorf(ErrNoMatch, "session %s %s before /%s/ appeared", name, describeEnd(st), o.Wait)
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			out, _ = s.finishRead(dir, out, trimRuneEnd(buf), o.Plain, true, false)
			return out, errorf(context.DeadlineExceeded, "/%s/ did not appear in session %s within %s", o.Wait, name, o.Timeout)
		}
		if time.Since(lastCheck) > 200*time.Millisecond {
			lastCheck = time.Now()
			if cur, err := s.Load(name); err == nil && cur.Status != protocol.PtyRunning {
				// One more pass over the file picks up the last output.
				st, running = cur, false
				continue
			}
		}
		select {
		case <-ctx.Done():
			out, _ = s.finishRead(dir, out, trimRuneEnd(buf), o.Plain, true, false)
			return out, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// finishRead fills out with raw output (its plain text with plain; then an
// escape sequence cut at the end is left for the next read while more may
// come) and, with save, stores where the next read starts.
func (s Store) finishRead(dir string, out *protocol.PtyOutput, raw []byte, plain, more, save bool) (*protocol.PtyOutput, error) {
	if plain {
		text, complete := termtext.Append(nil, raw)
		if more {
			raw = raw[:complete]
		}
		out.Data = string(text)
	} else {
		out.Data = string(raw)
	}
	out.NextOffset = out.Offset + int64(len(raw))
	if save {
		if err := atomicfile.WriteFile(filepath.Join(dir, CursorFile), []byte(strconv.FormatInt(out.NextOffset, 10)+"\n"), teamdir.FileMode); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func readCursor(dir string) int64 {
	b, err := os.ReadFile(filepath.Join(dir, CursorFile))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// Wait blocks until the session's program has ended and returns the final
// state (status exited, or dead when the holder vanished).
func (s Store) Wait(ctx context.Context, name string) (*protocol.PtySession, error) {
	for {
		st, err := s.Load(name)
		if err != nil {
			return nil, err
		}
		if st.Status != protocol.PtyRunning {
			return st, nil
		}
		if _, err := s.call(ctx, s.Dir(name), st, request{Op: "wait"}); err != nil {
			if ctx.Err() != nil {
				return st, ctx.Err()
			}
			// The holder is going away: look again shortly.
			select {
			case <-ctx.Done():
				return st, ctx.Err()
			case <-time.After(pollInterval):
			}
		}
	}
}

// Kill signals a running session's process group (and any other process
// of its terminal session), escalates to SIGKILL after grace, and waits
// until the holder recorded the end. A dead session's orphaned program is
// killed too.
func (s Store) Kill(ctx context.Context, name string, sig syscall.Signal, grace time.Duration) (*protocol.PtySession, error) {
	st, err := s.Load(name)
	if err != nil {
		return nil, err
	}
	switch st.Status {
	case protocol.PtyExited:
		return st, errorf(ErrNotRunning, "session %s is not running (%s)", name, describeEnd(st))
	case protocol.PtyDead:
		killSession(st, syscall.SIGKILL)
		return st, nil
	}
	killSession(st, sig)
	continueHolder(st)
	if sig != syscall.SIGKILL && grace > 0 {
		gctx, cancel := context.WithTimeout(ctx, grace)
		end, err := s.Wait(gctx, name)
		cancel()
		if err == nil {
			return end, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		killSession(st, syscall.SIGKILL)
	} else if sig != syscall.SIGKILL {
		return s.Load(name)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return s.Wait(wctx, name)
}

// continueHolder sends SIGCONT to the holder: a holder that is stopped
// (SIGSTOP or SIGTSTP sent to it: it has no controlling terminal) cannot
// see its program end and record it, and kill would wait in vain. It goes
// whatever the holder's state reads: a stop sent just before takes hold
// thread by thread, and until it has, /proc may show the holder running;
// to a holder that runs, SIGCONT does nothing.
func continueHolder(st *protocol.PtySession) {
	proc.Default.Signal(proc.Target{PID: st.HolderPID, Start: st.HolderStart}, syscall.SIGCONT)
}

// killSession signals the program's process group and the other process
// groups of its terminal session (jobs of an interactive shell), but only
// while the program is still the process that was started: a pg-pty
// program leads its own session and process group, which session.json
// (a file anyone may edit) cannot change. Refused targets (pid 1, this
// process, its ancestors) get nothing.
func killSession(st *protocol.PtySession, sig syscall.Signal) {
	lead := proc.Target{PID: st.PID, Start: st.PIDStart, PGID: st.PID, SID: st.PID, Terminal: true}
	if sent, err := proc.Default.SignalGroup(lead, sig); err != nil || !sent {
		return
	}
	for _, m := range sessionMembers(st.PID) {
		proc.Default.Signal(proc.Target{PID: m.PID, Start: m.Start, SID: st.PID}, sig)
	}
}

// sessionMembers lists the processes whose session id is sid, but for
// its leader.
func sessionMembers(sid int) []proc.Member {
	var out []proc.Member
	proc.Scan(func(s proc.Stat) {
		if s.SID == sid && s.PID != sid {
			out = append(out, proc.Member{PID: s.PID, Start: s.Start})
		}
	})
	return out
}

// Clean removes ended sessions: the named ones, or all of them. A running
// session is refused unless force, which kills it first.
func (s Store) Clean(ctx context.Context, names []string, force bool) ([]string, error) {
	all := len(names) == 0
	if all {
		list, err := s.List()
		if err != nil {
			return nil, err
		}
		for _, st := range list {
			if st.Status != protocol.PtyRunning || force {
				names = append(names, st.Name)
			}
		}
	}
	var removed []string
	for _, name := range names {
		st, err := s.Load(name)
		if err != nil && !all {
			if errors.Is(err, ErrNoSession) || errors.Is(err, ErrBadInput) {
				return removed, err
			}
		}
		if err != nil && all {
			// No state yet: a start may be under way; leave young ones be.
			if fi, serr := os.Stat(s.Dir(name)); serr != nil || time.Since(fi.ModTime()) < time.Minute {
				continue
			}
		}
		if st != nil {
			switch st.Status {
			case protocol.PtyRunning:
				if !force {
					return removed, fmt.Errorf("session %s is running: end it with pg-pty kill %s, or clean --force", name, name)
				}
				if _, err := s.Kill(ctx, name, syscall.SIGKILL, 0); err != nil && !errors.Is(err, ErrNotRunning) {
					return removed, err
				}
			case protocol.PtyDead:
				killSession(st, syscall.SIGKILL)
			}
		}
		if err := os.RemoveAll(s.Dir(name)); err != nil {
			return removed, err
		}
		removed = append(removed, name)
	}
	return removed, nil
}
