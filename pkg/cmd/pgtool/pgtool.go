// Package pgtool is the command line of pg-tool, the agent's hands: it
// lists and runs tools (built-in, external and MCP) confined to a workspace.
package pgtool

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/config"
	"github.com/powerglide/powerglide/pkg/jq"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/skills"
	"github.com/powerglide/powerglide/pkg/termtext"
	"github.com/powerglide/powerglide/pkg/tool"
)

// Spec describes pg-tool for cli.Main.
func Spec() *cli.Spec { return SpecWith(Hooks{}) }

// Hooks are what a test may change in pg-tool; the binary uses none.
type Hooks struct {
	// SandboxMissing names sandbox mechanisms (landlock, seccomp, userns)
	// to treat as missing, so a test can show the refusal path on a
	// machine that has them all.
	SandboxMissing []string
	// Account stands for the user's passwd entry (os/user.Current), so a
	// test can give it a home of its own, or none.
	Account func() (*user.User, error)
}

// SpecWith describes pg-tool with test hooks.
func SpecWith(h Hooks) *cli.Spec {
	return &cli.Spec{
		Name: "pg-tool",
		Description: `Run the tools of a coding agent: shell, files, search, terminals, external tools and MCP servers.
pg-tool list prints tool definitions ready for a model request; pg-tool call runs one call; pg-tool serve runs a stream of calls, one JSON line each, and answers each with a result line tagged with the call's id.

Built-in tools: bash, read, write, edit, glob, grep, ls, and term_start, term_send, term_read, term_screen and term_kill (pseudo-terminal sessions through pg-pty, which reach only the sessions this pg-tool started: see --term-scope). File tools are confined to --root: a path that leaves it through "..", an absolute path or a symlink is refused; read, write and edit work on regular files only (a FIFO, socket or device is refused, never opened for long). Outputs longer than --max-output characters keep their head and tail; the full text (up to --max-saved-output bytes) is saved, private to the user, in a file the result names, which read may open: read opens nothing else in that directory (no symlinks, no files pg-tool did not name that way). Every call ends when pg-tool is asked to stop (SIGTERM, SIGINT): it exits promptly with 128+n (a call that does not stop is left after 2 seconds).

External tools are executables in --tools-dir that print {"name","description","input_schema"} (and "read_only":true to stay in the readonly preset) for --schema; a call runs one in the workspace with the input JSON on stdin and POWERGLIDE_TOOL_ROOT set: its stdout is the output, and a non-zero exit fails the call with its stderr as the error. MCP servers given with --mcp (or the config key mcp) add their tools as mcp__NAME__TOOL: a command is run as a child over stdio; an https:// URL (http:// on loopback) is reached over streamable HTTP, or legacy SSE when the server offers only that, with the headers of --mcp-header or the config key mcp_headers. pg-tool mcp serves all these tools to an MCP client.

Agent Skills (folders with a SKILL.md) found in .powerglide/skills and .claude/skills from --root up to the repository root, then in $XDG_CONFIG_HOME/powerglide/skills and ~/.claude/skills, add the skill tool, which returns a skill's instructions and the paths of its files; read opens the files of a skill's folder even outside --root, and nothing else outside it. pg-tool skills lists them; --no-skills turns them off. A SKILL.md is read only as a regular file (no symbolic link, no named pipe) of yours or root's that no other user may write, and the walk up stops below a parent (or its .git) that another user owns or may write, or that is a link; each file left out is a warning naming it.

Safety: every command pg-tool starts (bash, --verify, external tools, MCP servers, terminal programs) runs in a sandbox, --sandbox workspace-write by default: reads everywhere but the secret paths, a best-effort list (~/.ssh, ~/.gnupg, ~/.netrc, ~/.password-store, ~/.local/share/keyrings, ~/.aws, ~/.azure, ~/.config/gcloud, ~/.kube, ~/.docker/config.json, ~/.git-credentials, ~/.config/git/credentials, ~/.config/gh, ~/.npmrc, ~/.pypirc, ~/.cargo/credentials.toml, ~/.cargo/credentials, ~/.pgpass, shell histories, browser profiles, in $HOME and the passwd entry's home; powerglide's config file, $POWERGLIDE_HOME, --deny-read; one inside the workspace cannot be hidden, and pg-tool sandbox lists it under not_hidden; redaction of outputs is for accidents, not a barrier); writes only in --root, a private TMPDIR and the sandbox's own build caches (GOCACHE, GOMODCACHE, npm, pip, Cargo and XDG caches under $POWERGLIDE_HOME/cache/sandbox, config key sandbox_cache; the user's caches stay read-only, and GOPROXY tries the user's module cache first, so a module the user has builds offline); no network (no TCP or UDP, loopback included, no unix sockets); no setuid or setgid bit and no change of owner on any file; no terminal but a term_* program's own (not /dev/pts, not the terminal pg-tool runs in; so no pseudo-terminal of a command's own either: script, expect); no signal or ptrace to pg-tool; every process a bash call leaves behind ends with it. Not covered (Landlock has no right for them): other mode bits, timestamps and extended attributes of the user's own files outside the writable paths. read-only allows writes only in the private TMPDIR, and withholds the write and edit tools (they change files from pg-tool itself); off runs commands unconfined. Widen with --allow-write PATH and --allow-net (TCP and UDP; unix sockets stay closed). Commands get only PATH, HOME, USER, LOGNAME, LANG, LC_*, TERM, SHELL, TZ, TMPDIR and the build-cache variables, plus --pass-env NAME. Landlock, seccomp, no_new_privs, dropped capabilities and a PID namespace per command (in a user namespace unless pg-tool runs as root) enforce it; a kernel that lacks one gets each sandboxed command refused with an error naming what is missing (--sandbox off runs unconfined), never a weaker sandbox. pg-tool sandbox prints what is in force; every result says "sandbox":"<mode>". pg-tool exec runs one command the same way (pg-loop runs its verify commands so).

Secrets: results (output, error, saved full output) never hold the value of a secret set in pg-tool's environment or config (variables named like *KEY*, *TOKEN*, *SECRET*, *PASSWORD*, provider variables) or a string shaped like an Anthropic, OpenAI, GitHub, AWS or bearer key: each is replaced by [redacted:NAME]. Output brought in from outside (every MCP and external tool, a bash command with a URL, curl, wget, nc or git clone/fetch/pull) is marked "untrusted":true; pg-loop shows it to the model as <untrusted source="TOOL">...</untrusted> and guards against what it carries.

Examples:
  $ pg-tool list | jq -r '.[].name'
  $ pg-tool call read '{"path":"go.mod"}'
  $ echo '{"id":"1","name":"bash","input":{"command":"echo hi"}}' | pg-tool serve`,
		CLI:     &CLI{hooks: h},
		Schemas: []string{"tool-list", "tool-def", "tool-call", "tool-list-request", "tool-result", "tool-output", "tool-sandbox", "tool-skill"},
	}
}

// CLI is pg-tool's grammar.
type CLI struct {
	cli.Common `embed:""`

	Root            string        `help:"Workspace root: file tools cannot reach outside it (default: the working directory)." placeholder:"DIR" env:"POWERGLIDE_TOOL_ROOT"`
	Preset          string        `help:"Tool set: full, or readonly (read, glob, grep, ls, term_read, term_screen and read-only external/MCP tools)." enum:"full,readonly" default:"full"`
	Allow           []string      `help:"Only offer tools whose name matches one of these globs, e.g. 'read,grep,mcp__fs__*'." placeholder:"GLOB"`
	Deny            []string      `help:"Never offer tools whose name matches one of these globs, e.g. 'bash,term_*'." placeholder:"GLOB"`
	ToolsDir        string        `help:"Directory of external tools: every executable there that prints its definition for --schema (default ~/.config/powerglide/tools)." config:"tools_dir" env:"POWERGLIDE_TOOLS_DIR" placeholder:"DIR"`
	MCP             []string      `name:"mcp" help:"MCP server as 'name=command args', or 'name=https://host/path' for one reached over HTTP (streamable HTTP, else legacy SSE; http:// on loopback only) (repeatable); its tools are named mcp__name__tool. Default: the config key mcp." sep:"none" placeholder:"NAME=CMD|URL"`
	MCPHeader       []string      `name:"mcp-header" help:"HTTP header for the MCP server NAME, as 'NAME:Key=Value' (repeatable); $${VAR} in the value is read from the environment, which keeps the secret off the command line. Values never appear in results, logs or records. Adds to (and per key overrides) the config key mcp_headers." sep:"none" placeholder:"NAME:KEY=VALUE"`
	MCPStartTimeout time.Duration `name:"mcp-start-timeout" help:"Time an MCP server command has to start and answer, a package that npx -y or uvx downloads first included (default 30s)." config:"mcp_start_timeout" env:"POWERGLIDE_MCP_START_TIMEOUT" placeholder:"DURATION"`
	MCPTimeout      time.Duration `name:"mcp-timeout" help:"Time limit of one MCP tool call; a server that does not answer in time is stopped (with its process group) and restarted on the next call (default 10m)." config:"mcp_timeout" env:"POWERGLIDE_MCP_TIMEOUT" placeholder:"DURATION"`
	Verify          string        `help:"Edit veto: run CMD with bash -c in the root before and after every edit or write; a change that makes it newly fail is rolled back and the call fails with CMD's output. When CMD already failed, only a change that adds failure lines (compared without line numbers and timings) is rolled back." placeholder:"CMD"`
	VerifyTimeout   time.Duration `help:"Time limit of one run of the --verify command." default:"5m"`
	MaxOutput       int           `help:"Cap on a result's output in characters; longer outputs keep head and tail (negative: no cap)." default:"30000"`
	OutputDir       string        `help:"Where full outputs of capped results are saved (default $POWERGLIDE_HOME/tool-output). read opens only the files pg-tool saved there." placeholder:"DIR"`
	MaxSaved        int           `name:"max-saved-output" help:"Cap in bytes on one saved full output; a longer one keeps its first and last halves (default 16777216, 16 MiB; 0: no cap)." config:"tool_max_saved_output" env:"POWERGLIDE_TOOL_MAX_SAVED_OUTPUT" placeholder:"BYTES"`
	Sandbox         string        `help:"Sandbox of every command pg-tool starts (bash, external tools, MCP servers, terminal programs): workspace-write (writes only in --root, a private TMPDIR and the sandbox's own build caches; no network), read-only (writes only in the private TMPDIR; the write and edit tools are not offered) or off (default workspace-write)." config:"sandbox" env:"POWERGLIDE_SANDBOX" placeholder:"MODE"`
	AllowWrite      []string      `name:"allow-write" help:"Let sandboxed commands write in PATH too (repeatable)." placeholder:"PATH"`
	AllowNet        bool          `name:"allow-net" help:"Let sandboxed commands use the network: TCP and UDP over IPv4 and IPv6. Unix sockets stay closed (a socket is not checked by path: pg-pty sessions and store agents would answer)."`
	DenyRead        []string      `name:"deny-read" help:"Keep PATH unreadable to sandboxed commands, like ~/.ssh (repeatable)." placeholder:"PATH"`
	NoSkills        bool          `name:"no-skills" help:"Offer no Agent Skills: no skill tool, and read opens no skill folder outside --root." env:"POWERGLIDE_NO_SKILLS"`
	TermScope       string        `name:"term-scope" help:"Name space of the term_* tools' pg-pty sessions: a session the model calls NAME is SCOPE.NAME in pg-pty list, and the term_* tools reach only the sessions of their scope. Default: a fresh scope for this pg-tool, so no pg-tool reaches the user's sessions or another's, and the sessions serve and mcp started in it end with them; give one scope to several pg-tool call runs that share sessions." env:"POWERGLIDE_TERM_SCOPE" placeholder:"SCOPE"`
	PassEnv         []string      `name:"pass-env" help:"Give commands the variable NAME too; they get only PATH, HOME, USER, LANG, LC_*, TERM, SHELL, TZ, TMPDIR and the build-cache variables (repeatable). POWERGLIDE_PASS_ENV=NAME,... sets it, and pg-loop keeps those variables for its tools component too." env:"POWERGLIDE_PASS_ENV" placeholder:"NAME"`

	List        ListCmd        `cmd:"" help:"Print the tool definitions as a JSON array."`
	Call        CallCmd        `cmd:"" help:"Run one tool call and print its result."`
	Serve       ServeCmd       `cmd:"" help:"Run calls read as JSON lines from stdin; write one result line each."`
	Exec        ExecCmd        `cmd:"" help:"Run one command in the sandbox, as bash calls run, and exit with its code."`
	MCPServe    MCPCmd         `cmd:"" name:"mcp" help:"Serve the tools to an MCP client (Claude Code, codex, editors) over stdio."`
	Skills      SkillsCmd      `cmd:"" help:"List the Agent Skills found for the workspace (JSON Lines: name, description, path, source)."`
	SandboxInfo SandboxCmd     `cmd:"" name:"sandbox" help:"Print the sandbox mode in force and what enforces each rule on this machine, as JSON."`
	SandboxExec SandboxExecCmd `cmd:"" name:"sandbox-exec" hidden:"" help:"Run a command under a sandbox policy (used by pg-tool itself)."`

	skillWarnings []skills.Warning `kong:"-"`
	hooks         Hooks            `kong:"-"`
}

// session builds the tool session from the flags and the configuration.
// caller names the command for the sessions it starts ("pg-tool serve");
// stream is true for serve and mcp, which run a stream of calls: bash's
// working directory carries over, and the terminal sessions of their own
// scope end with them.
func (c *CLI) session(rt *cli.Runtime, caller string, stream bool) (*tool.Session, error) {
	cfg, err := rt.Config()
	if err != nil {
		return nil, err
	}
	mcp := c.MCP
	if len(mcp) == 0 {
		mcp = cfg.Strings("mcp")
	}
	outDir := c.OutputDir
	if outDir == "" {
		outDir = filepath.Join(cfg.String("home"), "tool-output")
	}
	headers, err := c.mcpHeaders(cfg, mcp)
	if err != nil {
		return nil, err
	}
	sb, err := c.sandbox(rt, cfg)
	if err != nil {
		return nil, err
	}
	s, err := tool.NewSession(tool.Options{
		Root:          c.Root,
		Preset:        c.Preset,
		Allow:         c.Allow,
		Deny:          c.Deny,
		ToolsDir:      cfg.String("tools_dir"),
		MCP:           mcp,
		MCPHeaders:    headers,
		MCPTimeout:    cfg.Duration("mcp_timeout"),
		MCPStart:      cfg.Duration("mcp_start_timeout"),
		Verify:        c.Verify,
		VerifyTimeout: c.VerifyTimeout,
		MaxOutput:     c.MaxOutput,
		OutputDir:     outDir,
		MaxSaved:      cmp.Or(cfg.Int("tool_max_saved_output"), -1), // 0: no cap
		PersistCwd:    stream,
		Env:           rt.IO.Env,
		PassEnv:       c.PassEnv,
		Sandbox:       sb,
		Helper:        helperBinary(),
		TermScope:     c.TermScope,
		// No later pg-tool reaches the sessions of a scope of its own.
		EndTermSessions: stream && c.TermScope == "",
		Caller:          caller,
		Log:             rt.IO.Err,
		Skills:          c.skills(rt),
	})
	if err != nil {
		sb.Close()
		return nil, cli.Usagef("%v", err)
	}
	return s, nil
}

// mcpHeaders are the headers of the MCP servers in use: the config key
// mcp_headers (for the servers given), then --mcp-header, which overrides
// a config header of the same server and name.
func (c *CLI) mcpHeaders(cfg *config.Config, specs []string) ([]tool.MCPHeader, error) {
	var fromConfig map[string]map[string]string
	if err := cfg.Decode("mcp_headers", &fromConfig); err != nil {
		return nil, err
	}
	inUse := map[string]bool{}
	for _, spec := range specs {
		if name, _, err := tool.ParseMCP(spec); err == nil {
			inUse[name] = true
		}
	}
	var out []tool.MCPHeader
	for _, server := range slices.Sorted(maps.Keys(fromConfig)) {
		if !inUse[server] {
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(fromConfig[server])) {
			out = append(out, tool.MCPHeader{Server: server, Key: key, Value: fromConfig[server][key]})
		}
	}
	for _, spec := range c.MCPHeader {
		h, err := tool.ParseMCPHeader(spec)
		if err != nil {
			return nil, cli.Usagef("--mcp-header: %v", err)
		}
		out = slices.DeleteFunc(out, func(o tool.MCPHeader) bool {
			return o.Server == h.Server && strings.EqualFold(o.Key, h.Key)
		})
		out = append(out, h)
	}
	return out, nil
}

// ListCmd prints the tool definitions.
//
//	$ pg-tool list --jq '.[].name' -r
//	$ npm i -g @modelcontextprotocol/server-filesystem
//	$ pg-tool --preset readonly --mcp 'fs=mcp-server-filesystem .' list
type ListCmd struct {
	Jq  string `help:"Apply a jq filter to the array of definitions (in-process, gojq); each result is printed as a JSON line." placeholder:"EXPR"`
	Raw bool   `short:"r" help:"With --jq, print string results as plain text, like jq -r."`
}

// Run prints the definitions; a failing MCP server or external tool is
// reported after the others are printed (exit 1).
func (l *ListCmd) Run(rt *cli.Runtime, c *CLI) error {
	filter, err := jq.New(l.Jq, l.Raw, rt.IO.Out, jsonl.NewEncoder(rt.IO.Out))
	if err != nil {
		return err
	}
	s, err := c.session(rt, "pg-tool list", false)
	if err != nil {
		return err
	}
	defer s.Close()
	c.warnSkills(rt)
	tools, terr := s.Tools(rt.Ctx)
	defs := make([]protocol.ToolDef, 0, len(tools))
	for _, t := range tools {
		defs = append(defs, t.Def())
	}
	if err := printDefs(rt, filter, defs); err != nil {
		return err
	}
	if terr != nil {
		return cli.Failf("tools", "%v", terr)
	}
	return nil
}

// printDefs prints the definitions as one JSON array, or what the filter
// makes of it.
func printDefs(rt *cli.Runtime, filter *jq.Filter, defs []protocol.ToolDef) error {
	if filter.Active() {
		return filter.Emit(rt.Ctx, defs)
	}
	return printValue(rt, defs)
}

// printValue prints v as one JSON line, indented on a terminal.
func printValue(rt *cli.Runtime, v any) error {
	enc := jsonl.NewEncoder(rt.IO.Out)
	if rt.IO.OutTTY {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}

// CallCmd runs one call.
//
//	$ pg-tool call read '{"path":"go.mod"}'
//	$ echo '{"command":"go test ./..."}' | pg-tool call bash -
//	$ pg-tool --root ~/src/app call grep '{"pattern":"TODO","glob":"*.go"}'
//
// The result is one JSON line. Exit 0 when ok, 2 for an unknown tool or
// input that fails the tool's schema, 1 when the tool failed.
type CallCmd struct {
	Name  string `arg:"" help:"Tool name (see pg-tool list)."`
	Input string `arg:"" optional:"" help:"Input as a JSON object, or - to read it from stdin (default {})."`
}

// Run runs the call and prints the result.
func (cc *CallCmd) Run(rt *cli.Runtime, c *CLI) error {
	input := []byte(cc.Input)
	if cc.Input == "-" {
		b, err := io.ReadAll(rt.IO.In)
		if err != nil {
			return fmt.Errorf("read input: %w", err)
		}
		input = b
	}
	if strings.TrimSpace(string(input)) == "" {
		input = []byte("{}")
	}
	if !json.Valid(input) {
		return cli.Usagef("input of %s is not valid JSON: %s", cc.Name, clip(string(input), 80))
	}
	s, err := c.session(rt, "pg-tool call", false)
	if err != nil {
		return err
	}
	defer s.Close()
	res := s.Call(rt.Ctx, protocol.ToolCall{ID: "call", Name: cc.Name, Input: input})
	if err := jsonl.NewEncoder(rt.IO.Out).Encode(res.ToolResult); err != nil {
		return err
	}
	if res.OK {
		return nil
	}
	if errors.Is(rt.Ctx.Err(), context.Canceled) {
		return rt.Ctx.Err()
	}
	code := cli.ExitFailure
	if res.Kind == tool.KindUnknownTool || res.Kind == tool.KindBadInput {
		code = cli.ExitUsage
	}
	return cli.Exit(code, errors.New(termtext.FirstLine(*res.Error)))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// ServeCmd runs a stream of calls.
//
//	$ printf '%s\n' '{"id":"1","name":"ls","input":{}}' | pg-tool serve
//	$ pg-tool serve --parallel 4 < calls.jsonl > results.jsonl
//
// Input lines are {"id","name","input"}; each gets one output line
// {"type":"result","id","name","ok","output","error","truncated","duration_ms"}.
// A malformed line gets {"type":"error","line":N,"message"} and the stream
// goes on. bash's working directory persists across calls; MCP servers start
// once and stop when the input ends.
type ServeCmd struct {
	Parallel int `help:"Run up to N calls at once; results may then come out of order (match them by id)." default:"1" placeholder:"N"`
}

// Run serves until the end of the input.
func (sc *ServeCmd) Run(rt *cli.Runtime, c *CLI) error {
	rt.JSON = true
	// A coprocess of pg-loop ends with it, even when pg-loop is killed.
	if err := proc.DieWithParentIfTied(rt.IO.Getenv); err != nil {
		return cli.Failf("serve", "%v", err)
	}
	if sc.Parallel < 1 {
		return cli.Usagef("--parallel must be at least 1, got %d", sc.Parallel)
	}
	// Narrowed before the session is set up: the narrowing stops the
	// world and hands the other processor's cached memory back, which
	// costs less the less has been allocated (100 page faults fewer).
	tool.NarrowProcessors(rt.IO.Getenv)
	s, err := c.session(rt, "pg-tool serve", true)
	if err != nil {
		return err
	}
	c.warnSkills(rt) // as pg-tool list does: pg-loop lists its tools through serve
	s.Warm()
	defer cli.TuneGC(rt.IO.Getenv)()
	err = s.Serve(rt.Ctx, cli.Pollable(rt.IO.In), rt.IO.Out, sc.Parallel)
	if cerr := s.Close(); err == nil && cerr != nil {
		fmt.Fprintf(rt.IO.Err, "pg-tool: warning: %v\n", cerr)
	}
	return err
}

// Help is the detailed help of the command (--help and the man page).
func (ListCmd) Help() string {
	return `Prints a JSON array of {name, description, input_schema}, ready for the tools of a pg-llm request. MCP servers are started to list their tools. A server command runs in the sandbox, without network unless --allow-net: install the server first (npx -y cannot download it there, and hangs until --mcp-start-timeout).

  $ pg-tool list --jq '.[].name' -r
  $ npm i -g @modelcontextprotocol/server-filesystem
  $ pg-tool --preset readonly --mcp 'fs=mcp-server-filesystem .' list
  $ pg-tool --mcp 'gh=https://mcp.example.com/mcp' --mcp-header 'gh:Authorization=Bearer ${GITHUB_TOKEN}' list`
}

// Help is the detailed help of the command (--help and the man page).
func (CallCmd) Help() string {
	return `Prints one result {type:"result", id, name, ok, output, error, truncated, full_output, duration_ms}. Exit 0 when ok, 2 for an unknown tool or input that fails the tool's schema, 1 when the tool failed.

  $ pg-tool call read '{"path":"go.mod"}'
  $ echo '{"command":"go test ./..."}' | pg-tool call bash -
  $ pg-tool --root ~/src/app call grep '{"pattern":"TODO","glob":"*.go"}'
  $ pg-tool --verify 'go build ./...' call edit '{"path":"main.go","old_string":"a","new_string":"b"}'`
}

// Help is the detailed help of the command (--help and the man page).
func (ServeCmd) Help() string {
	return `Input lines are {"id","name","input"}; each gets one result line tagged with its id. A line {"type":"list","id":ID} gets {"type":"tools","id":ID,"tools":[...]}, the definitions pg-tool list prints (pg-loop lists its default tools component this way). A malformed line gets {"type":"error","line":N,"message":...} and the stream goes on. bash's working directory persists across calls; MCP servers start once, are restarted on the next call when they die, and stop when the input ends.

  $ printf '%s\n' '{"id":"1","name":"ls","input":{}}' | pg-tool serve
  $ pg-tool serve --parallel 4 < calls.jsonl > results.jsonl`
}
