package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/internal/lazyre"
)

// External tools: executables in the tools directory that print their
// definition, {"name","description","input_schema"}, when run with
// --schema. A call runs the executable in the session's working directory
// with the input JSON on stdin; its stdout is the output, a non-zero exit
// makes the call fail with stderr as the error.

const (
	externalSchemaTimeout = 5 * time.Second
	externalCallTimeout   = 10 * time.Minute
)

var toolNameRe = lazyre.Compile(`^[a-zA-Z0-9_-]{1,64}$`)

func (s *Session) externals(ctx context.Context) []*Tool {
	s.extOnce.Do(func() { s.extList, s.extErr = s.loadExternals(ctx) })
	return s.extList
}

// external finds one external tool, trying the executable of that name first
// so a call need not run every tool's --schema.
func (s *Session) external(ctx context.Context, name string) *Tool {
	if s.opts.ToolsDir == "" || !toolNameRe().MatchString(name) {
		return nil
	}
	if exe := filepath.Join(s.opts.ToolsDir, name); isExecutable(exe) {
		if t, err := s.loadExternal(ctx, exe); err == nil && t.Name == name {
			return t
		}
	}
	for _, t := range s.externals(ctx) {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

func (s *Session) loadExternals(ctx context.Context) ([]*Tool, error) {
	if s.opts.ToolsDir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(s.opts.ToolsDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tools dir: %w", err)
	}
	var out []*Tool
	seen := map[string]string{}
	for _, e := range entries {
		exe := filepath.Join(s.opts.ToolsDir, e.Name())
		if strings.HasPrefix(e.Name(), ".") || !isExecutable(exe) {
			continue
		}
		t, err := s.loadExternal(ctx, exe)
		if err != nil {
			fmt.Fprintf(s.opts.Log, "pg-tool: warning: external tool %s skipped: %v\n", exe, err)
			continue
		}
		if _, ok := s.builtins[t.Name]; ok {
			fmt.Fprintf(s.opts.Log, "pg-tool: warning: external tool %s skipped: %q is a built-in tool\n", exe, t.Name)
			continue
		}
		if prev, ok := seen[t.Name]; ok {
			fmt.Fprintf(s.opts.Log, "pg-tool: warning: external tool %s skipped: %s already defines %q\n", exe, prev, t.Name)
			continue
		}
		seen[t.Name] = exe
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *Session) loadExternal(ctx context.Context, exe string) (*Tool, error) {
	var stdout, stderr bytes.Buffer
	code, err := s.runGroup(ctx, run{timeout: externalSchemaTimeout, dir: s.rootPath, env: s.env(), stdout: &stdout, stderr: &stderr}, exe, "--schema")
	if err != nil {
		return nil, fmt.Errorf("%s --schema: %w", exe, err)
	}
	if code != 0 {
		return nil, fmt.Errorf("%s --schema exited with code %d: %s", exe, code, strings.TrimSpace(stderr.String()))
	}
	var def struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
		ReadOnly    bool            `json:"read_only"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &def); err != nil {
		return nil, fmt.Errorf("%s --schema did not print a tool definition: %v", exe, err)
	}
	if !toolNameRe().MatchString(def.Name) || strings.HasPrefix(def.Name, "mcp__") {
		return nil, fmt.Errorf("%s --schema: bad tool name %q (letters, digits, _ and -, up to 64)", exe, def.Name)
	}
	if len(def.InputSchema) == 0 || def.InputSchema[0] != '{' {
		def.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	return &Tool{
		Name:        def.Name,
		Description: def.Description,
		Schema:      def.InputSchema,
		ReadOnly:    def.ReadOnly,
		Untrusted:   always,
		Run: func(ctx context.Context, s *Session, input json.RawMessage) (string, error) {
			var stdout, stderr bytes.Buffer
			s.mu.Lock()
			dir := filepath.Join(s.rootPath, s.cwd)
			s.mu.Unlock()
			env := append(append([]string{}, s.env()...), "POWERGLIDE_TOOL_ROOT="+s.rootPath)
			code, err := s.runGroup(ctx, run{timeout: externalCallTimeout, dir: dir, env: env, stdin: input, stdout: &stdout, stderr: &stderr}, exe)
			if err == errTimeout {
				return stdout.String(), fmt.Errorf("external tool %s timed out after %s", def.Name, externalCallTimeout)
			}
			if err != nil {
				return stdout.String(), err
			}
			if code != 0 {
				msg := strings.TrimSpace(stderr.String())
				if msg == "" {
					msg = fmt.Sprintf("exited with code %d", code)
				}
				return stdout.String(), fmt.Errorf("%s: %s", def.Name, msg)
			}
			return stdout.String(), nil
		},
	}, nil
}
