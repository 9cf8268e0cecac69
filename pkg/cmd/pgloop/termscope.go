package pgloop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/powerglide/powerglide/pkg/loop"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// scopedTools is a tools component whose terminal sessions live in a term
// scope pg-loop made for the run (runTermScope): the one-shot commands of
// --tools share it from call to call, and a pg-tool serve restarted after
// it died reaches the sessions of the one before. Nothing reaches them
// once the run is over, so Close ends them, after the component.
type scopedTools struct {
	loop.Tools
	scope  string
	env    []string // the tools' environment (their POWERGLIDE_HOME)
	dir    string
	stderr io.Writer
	// started: the model asked for a terminal session (term_start), so
	// the scope may hold one. A run that never did pays no pg-pty at its
	// end.
	started atomic.Bool
}

// Call notes a term_start, then passes the calls on.
func (t *scopedTools) Call(ctx context.Context, calls []protocol.ToolCall) ([]protocol.ToolResult, error) {
	for _, c := range calls {
		if c.Name == "term_start" {
			t.started.Store(true)
		}
	}
	return t.Tools.Call(ctx, calls)
}

// Start and Usage are the component's own (a pg-tool serve coprocess is
// started ahead of its first call, and its CPU and peak memory go into
// the run's summary).
func (t *scopedTools) Start() {
	if s, ok := t.Tools.(interface{ Start() }); ok {
		s.Start()
	}
}

func (t *scopedTools) Usage() (protocol.ProcessUsage, bool) {
	if u, ok := t.Tools.(interface {
		Usage() (protocol.ProcessUsage, bool)
	}); ok {
		return u.Usage()
	}
	return protocol.ProcessUsage{}, false
}

// Close closes the component, then ends the scope's terminal sessions and
// removes their files; a failure there is a warning.
func (t *scopedTools) Close() error {
	err := t.Tools.Close()
	if !t.started.Load() {
		return err
	}
	if eerr := endTermScope(t.scope, t.env, t.dir); eerr != nil {
		fmt.Fprintf(t.stderr, "pg-loop: warning: %v\n", eerr)
	}
	return err
}

// endTermScope runs pg-pty clean --force on the sessions of scope, found
// with pg-pty list, with the tools' environment (their POWERGLIDE_HOME).
func endTermScope(scope string, env []string, dir string) error {
	bin, ok := ptyProgram()
	if !ok {
		return nil // no pg-pty: no session was started
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list := exec.CommandContext(ctx, bin, "list", "--json")
	list.Env, list.Dir = env, dir
	out, err := list.Output()
	if err != nil {
		return fmt.Errorf("end the run's terminal sessions: pg-pty list: %w", err)
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var rec struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && strings.HasPrefix(rec.Name, scope+".") {
			names = append(names, rec.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	clean := exec.CommandContext(ctx, bin, append([]string{"clean", "--force"}, names...)...)
	clean.Env, clean.Dir = env, dir
	if b, err := clean.CombinedOutput(); err != nil {
		return fmt.Errorf("end the run's terminal sessions: pg-pty clean: %w: %s", err, strings.TrimSpace(string(b)))
	}
	return nil
}

// ptyProgram is the pg-pty the tools find: next to this executable, else
// on PATH.
func ptyProgram() (string, bool) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "pg-pty")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	p, err := exec.LookPath("pg-pty")
	return p, err == nil
}
