package pgloop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/loop"
)

// scopedTools are one-shot tools commands whose terminal sessions live in
// a term scope pg-loop made for the run (runTermScope): nothing reaches
// them once the run is over, so Close ends them (pg-tool serve ends those
// of its own scope itself).
type scopedTools struct {
	*loop.CommandTools
	scope string
}

// Close ends the scope's terminal sessions and removes their files; a
// failure is a warning.
func (t *scopedTools) Close() error {
	if err := endTermScope(t.scope, t.Env, t.Dir); err != nil {
		fmt.Fprintf(t.Stderr, "pg-loop: warning: %v\n", err)
	}
	return t.CommandTools.Close()
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
