package tool

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/powerglide/powerglide/pkg/sandbox"
)

// Session runs tool calls in one workspace. It is safe for concurrent calls.
type Session struct {
	opts     Options
	root     *os.Root
	rootPath string // absolute, symlinks resolved
	rootAs   string // absolute as given, when it differs (a root reached through a symlink)

	mu       sync.Mutex
	verifyMu sync.Mutex
	cwd      string // bash's working directory, relative to the root

	builtins map[string]*Tool
	order    []*Tool

	extOnce sync.Once
	extList []*Tool
	extErr  error

	mcp     *mcpManager
	sandbox *sandbox.Sandbox

	termScope string // the term_* tools' name space in pg-pty (term.go)
	startedBy string // who starts their sessions, for pg-pty list
	termMu    sync.Mutex
	termLive  map[string]bool // sessions started and not killed, by the model's name

	locksMu sync.Mutex
	locks   map[string]*pathLock
}

type pathLock struct {
	mu   sync.Mutex
	refs int
}

// lockPath serializes changes to one file; it returns the unlock function.
func (s *Session) lockPath(r string) func() {
	s.locksMu.Lock()
	if s.locks == nil {
		s.locks = map[string]*pathLock{}
	}
	l := s.locks[r]
	if l == nil {
		l = &pathLock{}
		s.locks[r] = l
	}
	l.refs++
	s.locksMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.locksMu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.locks, r)
		}
		s.locksMu.Unlock()
	}
}

// Warm gets the sandbox ready for commands in the background (see
// sandbox.Sandbox.Warm): its private TMPDIR, its rules and its launcher
// thread, made when first needed otherwise. serve calls it as it starts,
// so the first call costs what the others do.
func (s *Session) Warm() { go s.sandbox.Warm() }

// NewSession opens the workspace root and registers the tools.
func NewSession(opts Options) (*Session, error) {
	if opts.Root == "" {
		opts.Root = "."
	}
	switch opts.Preset {
	case "":
		opts.Preset = "full"
	case "full", "readonly":
	default:
		return nil, fmt.Errorf("unknown preset %q (known: full, readonly)", opts.Preset)
	}
	if err := ValidateGlobs(opts.Allow); err != nil {
		return nil, err
	}
	if err := ValidateGlobs(opts.Deny); err != nil {
		return nil, err
	}
	if opts.MaxOutput == 0 {
		opts.MaxOutput = DefaultMaxOutput
	}
	if opts.MaxSaved == 0 {
		opts.MaxSaved = DefaultMaxSaved
	}
	if opts.VerifyTimeout <= 0 {
		opts.VerifyTimeout = 5 * time.Minute
	}
	if opts.MCPTimeout <= 0 {
		opts.MCPTimeout = DefaultMCPTimeout
	}
	if opts.MCPStart <= 0 {
		opts.MCPStart = DefaultMCPStart
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.TermScope == "" {
		opts.TermScope = newTermScope()
	} else if !termScopePattern.MatchString(opts.TermScope) {
		return nil, fmt.Errorf("invalid term scope %q: use up to 63 letters, digits, '_' and '-', starting with a letter or digit", opts.TermScope)
	}
	given, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("workspace root %s: %w", opts.Root, err)
	}
	abs, err := filepath.EvalSymlinks(given)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("workspace root %s is not a directory", abs)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	s := &Session{opts: opts, root: root, rootPath: abs, cwd: ".", builtins: map[string]*Tool{}, sandbox: opts.Sandbox,
		termScope: opts.TermScope, startedBy: fmt.Sprintf("%s (pid %d, term scope %s)", cmp.Or(opts.Caller, "pg-tool"), os.Getpid(), opts.TermScope)}
	if s.sandbox == nil {
		s.sandbox, _ = sandbox.New(sandbox.Policy{Mode: sandbox.Off})
	}
	if given != abs {
		s.rootAs = given
	}
	tools := builtinTools()
	if len(opts.Skills) > 0 {
		tools = append(tools, skillTool(opts.Skills))
	}
	for _, t := range tools {
		s.builtins[t.Name] = t
		s.order = append(s.order, t)
	}
	mcp, err := newMCPManager(s, opts.MCP, opts.MCPHeaders)
	if err != nil {
		root.Close()
		return nil, err
	}
	s.mcp = mcp
	return s, nil
}

// Close ends the terminal sessions it started (with EndTermSessions),
// stops MCP servers and releases the root.
func (s *Session) Close() error {
	if s.opts.EndTermSessions {
		s.endTerms()
	}
	err := s.mcp.close()
	return errors.Join(err, s.sandbox.Close(), s.root.Close())
}

// RootPath is the absolute workspace root.
func (s *Session) RootPath() string { return s.rootPath }

// errOutside marks a path argument that leaves the workspace.
var errOutside = errors.New("outside the workspace root")

// rel turns a path argument (relative to the root, or absolute) into a
// clean path relative to the root. It refuses paths that leave the root
// lexically; os.Root refuses symlinks that leave it.
func (s *Session) rel(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("path %q contains a NUL byte", p)
	}
	var r string
	if filepath.IsAbs(p) {
		r = relTo(s.rootPath, p)
		if s.rootAs != "" && (r == ".." || strings.HasPrefix(r, "../")) {
			r = relTo(s.rootAs, p)
		}
	} else {
		r = filepath.Clean(p)
	}
	if r == ".." || strings.HasPrefix(r, "../") {
		return "", fmt.Errorf("path %s is %w %s: paths must stay inside it", p, errOutside, s.rootPath)
	}
	return r, nil
}

func relTo(base, p string) string {
	r, err := filepath.Rel(base, filepath.Clean(p))
	if err != nil {
		return ".."
	}
	return r
}

// pathErr rewrites os.Root's errors about escapes into one a model can act on.
func (s *Session) pathErr(p string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "path escapes from parent"):
		if link, target, rest, ok := s.absLink(p); ok {
			if r := relTo(s.rootPath, target); r != ".." && !strings.HasPrefix(r, "../") {
				// os.Root never follows an absolute target, even one inside.
				return fmt.Errorf("path %s goes through the symlink %s with an absolute target (%s): absolute symlink targets are not followed; use the path %s", p, display(link), target, display(filepath.Join(r, rest)))
			}
		}
		return fmt.Errorf("path %s resolves %w %s (through a symlink or ..): refused", p, errOutside, s.rootPath)
	case errors.Is(err, fs.ErrNotExist):
		return missingError(p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied", p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s %v", p, pe.Op, pe.Err)
	}
	return fmt.Errorf("%s: %w", p, err)
}

// missingError names a path that does not exist; it is fs.ErrNotExist.
type missingError string

func (e missingError) Error() string        { return string(e) + ": no such file or directory" }
func (e missingError) Is(target error) bool { return target == fs.ErrNotExist }

// absLink finds the first symlink with an absolute target on the way to
// path argument p, and the part of the path after it.
func (s *Session) absLink(p string) (link, target, rest string, ok bool) {
	r, err := s.rel(p)
	if err != nil || r == "." {
		return "", "", "", false
	}
	parts := strings.Split(r, string(filepath.Separator))
	prefix := ""
	for i, part := range parts {
		prefix = filepath.Join(prefix, part)
		fi, err := s.root.Lstat(prefix)
		if err != nil {
			return "", "", "", false
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		t, err := s.root.Readlink(prefix)
		if err != nil {
			return "", "", "", false
		}
		if filepath.IsAbs(t) {
			return prefix, filepath.Clean(t), filepath.Join(parts[i+1:]...), true
		}
	}
	return "", "", "", false
}

// display is how a path relative to the root appears in outputs.
func display(rel string) string { return filepath.ToSlash(rel) }
