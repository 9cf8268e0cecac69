package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/remote"
)

// StdioArg is the argument that makes pg-queue agent serve one client on
// its stdin and stdout, as a coprocess, and exit when stdin ends.
const StdioArg = "--stdio"

// OpenPipe starts a private agent as a coprocess (path with args, which
// should ask it to serve on its stdin and stdout) and returns a client
// over the pipes. Closing the client ends the coprocess.
func OpenPipe(ctx context.Context, path string, args, env []string, stderr io.Writer) (*remote.Client, error) {
	if stderr == nil {
		stderr = io.Discard
	}
	held := &heldStderr{out: stderr}
	cmd := &exec.Cmd{Path: path, Args: args, Env: env, Stderr: held}
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("store agent: start %s: %w", path, err)
	}
	pw.Close()
	c, err := remote.NewClient(&pipeConn{r: pr, w: w.(*os.File), cmd: cmd}, remote.Options{HelloTimeout: 30 * time.Second})
	if err != nil {
		// The agent ended (NewClient waited for it): its error, such as
		// a server out of reach, is the one to report, once.
		if e := held.agentError(cmd.ProcessState); e != nil {
			err = e
		}
		held.release()
		return nil, err
	}
	held.release()
	return c, nil
}

// heldStderr holds a private agent's stderr until its hello, so that the
// error of an agent that could not open the store becomes the client's
// error instead of a line of its own; then it passes everything on.
type heldStderr struct {
	mu       sync.Mutex
	out      io.Writer
	buf      []byte
	released bool
}

func (h *heldStderr) Write(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return h.out.Write(b)
	}
	h.buf = append(h.buf, b...)
	return len(b), nil
}

// agentError takes the last line of an agent that exited with an error,
// "pg-queue: error: MSG", out of what is held and returns MSG as an
// error: a timeout (exit 124) still is one (context.DeadlineExceeded).
func (h *heldStderr) agentError(ps *os.ProcessState) error {
	if ps == nil || ps.ExitCode() <= 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	text := strings.TrimRight(string(h.buf), "\n")
	i := strings.LastIndexByte(text, '\n') + 1
	_, msg, ok := strings.Cut(text[i:], ": error: ")
	if !ok {
		return nil
	}
	h.buf = []byte(text[:i])
	if ps.ExitCode() == 124 {
		return &agentTimeout{msg}
	}
	return errors.New(msg)
}

// agentTimeout is the error of an agent that exited with 124.
type agentTimeout struct{ msg string }

func (e *agentTimeout) Error() string { return e.msg }
func (e *agentTimeout) Unwrap() error { return context.DeadlineExceeded }

// release passes on what is held, and from now on everything.
func (h *heldStderr) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.out.Write(h.buf)
	h.buf, h.released = nil, true
}

// pipeConn is a coprocess's stdout and stdin as one connection.
type pipeConn struct {
	r   *os.File
	w   *os.File
	cmd *exec.Cmd
}

func (p *pipeConn) Read(b []byte) (int, error)        { return p.r.Read(b) }
func (p *pipeConn) Write(b []byte) (int, error)       { return p.w.Write(b) }
func (p *pipeConn) SetReadDeadline(t time.Time) error { return p.r.SetReadDeadline(t) }

// Close ends stdin, on which the agent exits, and waits for it a while
// before killing it.
func (p *pipeConn) Close() error {
	p.w.Close()
	done := make(chan struct{})
	go func() {
		p.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
	return p.r.Close()
}

// RemoteOptions say how a binary that does not link the PostgreSQL driver
// (pg-loop) reaches a PostgreSQL store: through the host's agent, or a
// private one.
type RemoteOptions struct {
	Home, URL string
	Env       []string
	// Path is the pg-queue binary; Name the name it is run as (pg-queue).
	Path, Name string
	// Off: store_agent=off, a private agent coprocess only.
	Off bool
	// Stderr gets a private agent's errors, and Tool's warning when the
	// host's agent is refused (WarnRefused).
	Stderr io.Writer
	Tool   string
}

// OpenRemote opens the store through the host's agent, starting it when
// there is none, with a private agent coprocess as the fallback for
// everything the host's agent cannot answer (none reachable, the
// connection lost); with Off, through a private coprocess only.
func OpenRemote(ctx context.Context, o RemoteOptions) (store.Store, error) {
	env := childEnv(o.Env, o.Home, o.URL)
	private := func() (store.Store, error) {
		return OpenPipe(ctx, o.Path, []string{o.Name, "agent", StdioArg}, env, o.Stderr)
	}
	if o.Off {
		return private()
	}
	began := time.Now()
	c, err := Open(ctx, OpenOptions{
		Home: o.Home, URL: o.URL, Env: o.Env,
		Path: o.Path, Args: []string{o.Name, "agent", fmt.Sprintf("--ready-fd=%d", ReadyFD)},
		Direct: private,
	})
	if err != nil {
		WarnRefused(o.Stderr, o.Tool, err)
		// The private agent gets what is left of the connect timeout: a
		// host agent that found the server silent has spent its part.
		return OpenPipe(ctx, o.Path, []string{o.Name, "agent", StdioArg}, append(env, BeganEnv+"="+strconv.FormatInt(began.UnixNano(), 10)), o.Stderr)
	}
	return c, nil
}

// BeganEnv tells a private agent (StdioArg) when its client began to
// reach the store, in Unix nanoseconds: its connect timeout counts from
// then (dial.Options.Began).
const BeganEnv = "POWERGLIDE_STORE_BEGAN"

// childEnv is an agent's environment: the starting command's, without the
// variables named like secrets (the model keys pg-loop holds for pg-llm, a
// GITHUB_TOKEN) except libpq's own (PGPASSWORD and the like), which the
// agent connects with; then the data root and the store. A host's agent
// outlives the command that started it and serves every later command of
// the user: it must hold no key it does not use (DESIGN.md: only pg-llm
// holds model keys). Clients redact their secrets before they send
// (docs/store-agent.md), so the agent needs none of theirs.
func childEnv(env []string, home, url string) []string {
	var keep []string
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "PG") {
			keep = append(keep, name)
		}
	}
	return append(secrets.ScrubEnv(env, keep...), "POWERGLIDE_HOME="+home, "POWERGLIDE_STORE="+url)
}
