package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is the type of a key's value.
type Kind int

const (
	KindString Kind = iota
	KindInt
	KindFloat
	KindBool
	KindDuration
	KindStrings // a JSON array of strings; comma-separated in env and flags
	KindObject  // any JSON object, decoded by the tool that owns it
)

func (k Kind) String() string {
	return [...]string{"string", "integer", "number", "boolean", "duration", "list of strings", "object"}[k]
}

// Key is one configuration key.
type Key struct {
	Name    string
	Kind    Kind
	Env     []string // variables, in order of preference
	Default any
	// DefaultFunc computes a default from the environment (e.g. under $HOME).
	DefaultFunc func(env func(string) (string, bool)) any
	Secret      bool
	Help        string
}

// keys is the registry of every configuration key, one place for all
// tools: the shared keys here, and those of a tool that has many in a file
// of their own, so that tools add keys without touching each other's lines.
var keys = slices.Concat(baseKeys, monitorKeys, loopSafetyKeys)

var baseKeys = []Key{
	{Name: "home", Kind: KindString, Env: []string{"POWERGLIDE_HOME"}, Help: "data root: teams/, sessions/, pty/, pipelines/, tool-output/, run/ (the store agents' sockets)",
		DefaultFunc: func(env func(string) (string, bool)) any {
			h, _ := env("HOME")
			return filepath.Join(h, ".powerglide")
		}},
	{Name: "model", Kind: KindString, Env: []string{"POWERGLIDE_MODEL"}, Default: "anthropic/claude-sonnet-4-5", Help: "model id or fallback chain (provider/model,...)"},
	{Name: "max_tokens", Kind: KindInt, Env: []string{"POWERGLIDE_MAX_TOKENS"}, Default: 8192, Help: "default max_tokens of a model request"},
	{Name: "retries", Kind: KindInt, Env: []string{"POWERGLIDE_RETRIES"}, Default: 4, Help: "retries per model before falling back"},
	{Name: "timeout", Kind: KindDuration, Env: []string{"POWERGLIDE_TIMEOUT"}, Default: 10 * time.Minute, Help: "overall timeout of a model call"},
	{Name: "attempt_timeout", Kind: KindDuration, Env: []string{"POWERGLIDE_ATTEMPT_TIMEOUT"}, Default: 5 * time.Minute, Help: "timeout of one model attempt"},
	{Name: "anthropic_api_key", Kind: KindString, Env: []string{"ANTHROPIC_API_KEY"}, Secret: true, Help: "Anthropic API key"},
	{Name: "anthropic_base_url", Kind: KindString, Env: []string{"ANTHROPIC_BASE_URL"}, Help: "Anthropic API base URL"},
	{Name: "openai_api_key", Kind: KindString, Env: []string{"OPENAI_API_KEY"}, Secret: true, Help: "OpenAI API key"},
	{Name: "openai_base_url", Kind: KindString, Env: []string{"OPENAI_BASE_URL"}, Help: "OpenAI API base URL"},
	{Name: "providers", Kind: KindObject, Help: `named providers: {"ollama":{"kind":"openai-compatible","base_url":"http://localhost:11434/v1"}}`},
	{Name: "models", Kind: KindObject, Help: `model table overrides: {"anthropic/x":{"context_window":200000,"input_per_mtok":3}}`},
	{Name: "tools_dir", Kind: KindString, Env: []string{"POWERGLIDE_TOOLS_DIR"}, Help: "directory of external tools",
		DefaultFunc: func(env func(string) (string, bool)) any {
			return filepath.Join(filepath.Dir(DefaultFile(env)), "tools")
		}},
	{Name: "mcp", Kind: KindStrings, Env: []string{"POWERGLIDE_MCP"}, Default: []string{}, Help: "MCP servers as name=command args"},
	{Name: "mcp_headers", Kind: KindObject, Secret: true, Help: `pg-tool: HTTP headers of the MCP servers reached over HTTP, by server: {"gh":{"Authorization":"Bearer ${GITHUB_TOKEN}"}}; ${NAME} is read from the environment, and every value is kept out of outputs and records`},
	{Name: "mcp_start_timeout", Kind: KindDuration, Env: []string{"POWERGLIDE_MCP_START_TIMEOUT"}, Default: 30 * time.Second, Help: "pg-tool: time an MCP server has to start and answer (npx -y downloading a package counts)"},
	{Name: "mcp_timeout", Kind: KindDuration, Env: []string{"POWERGLIDE_MCP_TIMEOUT"}, Default: 10 * time.Minute, Help: "pg-tool: time limit of one MCP tool call; a server that does not answer in time is stopped and restarted on the next call"},
	{Name: "tool_max_saved_output", Kind: KindInt, Env: []string{"POWERGLIDE_TOOL_MAX_SAVED_OUTPUT"}, Default: 16 << 20, Help: "pg-tool: cap in bytes on one saved full output of a capped result; a longer one keeps its first and last halves (0: no cap)"},
	{Name: "sandbox", Kind: KindString, Env: []string{"POWERGLIDE_SANDBOX"}, Default: "workspace-write", Help: "pg-tool: sandbox of the commands it starts: workspace-write, read-only or off"},
	{Name: "sandbox_cache", Kind: KindString, Env: []string{"POWERGLIDE_SANDBOX_CACHE"}, Help: "pg-tool: directory of the sandbox's own build caches (Go, npm, pip, Cargo, XDG), which sandboxed commands write in place of the user's (default $POWERGLIDE_HOME/cache/sandbox)"},
	{Name: "team", Kind: KindString, Env: []string{"POWERGLIDE_TEAM"}, Default: "default", Help: "team name: the queue and workers in $POWERGLIDE_HOME/teams/<team>/"},
	{Name: "store", Kind: KindString, Env: []string{"POWERGLIDE_STORE"}, Default: "", Help: "where team state lives for pg-queue, pg-loop --team, pg-monitor and pg-dash: empty or file: (the team directories under home), file:/path (those under /path), postgres://… or a libpq keyword string (PostgreSQL)"},
	{Name: "store_agent", Kind: KindString, Env: []string{"POWERGLIDE_STORE_AGENT"}, Default: "auto", Help: "pg-queue on a PostgreSQL store: auto (commands go through this host's store agent, pg-queue agent, started on first use) or off (each command connects to the database itself); the file store never uses one"},
	{Name: "store_agent_idle", Kind: KindDuration, Env: []string{"POWERGLIDE_STORE_AGENT_IDLE"}, Default: 60 * time.Second, Help: "pg-queue agent: exit after this long with no client"},
	{Name: "queue_sync", Kind: KindBool, Env: []string{"POWERGLIDE_QUEUE_SYNC"}, Default: true, Help: "fsync the task queue after each change (false: faster; a power loss may lose the last changes, a killed process never corrupts it)"},
	{Name: "queue_keep_finished", Kind: KindInt, Env: []string{"POWERGLIDE_QUEUE_KEEP_FINISHED"}, Default: 500, Help: "finished tasks kept in task-queue.json; beyond that the oldest move to task-archive.jsonl"},
	{Name: "lease", Kind: KindDuration, Env: []string{"POWERGLIDE_LEASE"}, Default: 10 * time.Minute, Help: "task lease length"},
	{Name: "loop_max_steps", Kind: KindInt, Env: []string{"POWERGLIDE_MAX_STEPS"}, Default: 200, Help: "pg-loop: model turns per task before the step limit stops it"},
	{Name: "loop_budget_tokens", Kind: KindInt, Env: []string{"POWERGLIDE_BUDGET_TOKENS"}, Default: 0, Help: "pg-loop: token budget of a run (0: none)"},
	{Name: "loop_budget_usd", Kind: KindFloat, Env: []string{"POWERGLIDE_BUDGET_USD"}, Default: 0.0, Help: "pg-loop: dollar budget of a run (0: none)"},
	{Name: "guard", Kind: KindString, Env: []string{"POWERGLIDE_GUARD"}, Default: "warn", Help: "pg-loop: exfiltration guard for URLs and keys from untrusted tool output: off, warn (report a guard event) or strict (also refuse the call)"},
	{Name: "loop_context_window", Kind: KindInt, Env: []string{"POWERGLIDE_CONTEXT_WINDOW"}, Default: 200000, Help: "pg-loop: the context window in tokens for memory windowing (0: off); when unset, the model's window from pg-llm models, else this default"},
	{Name: "dash_stale", Kind: KindDuration, Env: []string{"POWERGLIDE_DASH_STALE"}, Default: 30 * time.Second, Help: "pg-dash: heartbeat age shown as stale (red)"},
	{Name: "dash_refresh", Kind: KindDuration, Env: []string{"POWERGLIDE_DASH_REFRESH"}, Default: time.Second, Help: "pg-dash: polling interval when file notifications are unavailable"},
	{Name: "pty_cols", Kind: KindInt, Env: []string{"POWERGLIDE_PTY_COLS"}, Default: 80, Help: "pg-pty terminal width in columns"},
	{Name: "pty_rows", Kind: KindInt, Env: []string{"POWERGLIDE_PTY_ROWS"}, Default: 24, Help: "pg-pty terminal height in rows"},
	{Name: "pty_max_output", Kind: KindInt, Env: []string{"POWERGLIDE_PTY_MAX_OUTPUT"}, Default: 64 << 20, Help: "pg-pty: cap in bytes on a session's output.log; older output is discarded, offsets stay valid (0: no cap)"},
	{Name: "pty_term", Kind: KindString, Env: []string{"POWERGLIDE_PTY_TERM"}, Default: "xterm-256color", Help: "TERM given to programs pg-pty runs"},
}

// MaxDuration bounds every duration a tool reads, from flags, the
// environment or the config file: 100 years. A lease or deadline taken from
// now then stays far below the year 2262, where time.Time's nanoseconds
// overflow (a lease of 2562047h once counted as expired at once).
const MaxDuration = 100 * 365 * 24 * time.Hour

// ParseDuration reads a duration such as 30s or 10m, from 0 to MaxDuration.
func ParseDuration(raw string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(raw))
	switch {
	case err != nil:
		return 0, fmt.Errorf("expected a duration such as 30s or 10m, at most %s (100 years), got %q", maxDurationText, raw)
	case d < 0:
		return 0, fmt.Errorf("expected a duration that is not negative, got %q", raw)
	case d > MaxDuration:
		return 0, fmt.Errorf("duration %q is out of range: at most %s (100 years)", raw, maxDurationText)
	}
	return d, nil
}

const maxDurationText = "876000h"

// checkNumber refuses the numbers no key means: every numeric key counts
// or measures something (tokens, retries, dollars, columns), so a negative,
// NaN or infinite value is a mistake, never a setting.
func checkNumber[T int | float64](v float64, raw string) (T, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("expected a finite number, got %q", raw)
	}
	if v < 0 {
		return 0, fmt.Errorf("expected a number that is not negative, got %q", raw)
	}
	return T(v), nil
}

// Lookup finds a registered key.
func Lookup(name string) (Key, bool) {
	for _, k := range keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

func (k Key) defaultValue(env func(string) (string, bool)) any {
	if k.DefaultFunc != nil {
		return k.DefaultFunc(env)
	}
	if k.Default != nil {
		return k.Default
	}
	switch k.Kind {
	case KindInt:
		return 0
	case KindFloat:
		return 0.0
	case KindBool:
		return false
	case KindDuration:
		return time.Duration(0)
	case KindStrings:
		return []string{}
	case KindObject:
		return json.RawMessage(nil)
	}
	return ""
}

// parse reads a value from an environment variable or a flag.
func (k Key) parse(raw string) (any, error) {
	switch k.Kind {
	case KindString:
		return raw, nil
	case KindInt:
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("expected an integer, got %q", raw)
		}
		return checkNumber[int](float64(n), raw)
	case KindFloat:
		f, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil {
			return nil, fmt.Errorf("expected a number, got %q", raw)
		}
		return checkNumber[float64](f, raw)
	case KindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("expected true or false, got %q", raw)
		}
		return b, nil
	case KindDuration:
		return ParseDuration(raw)
	case KindStrings:
		if strings.HasPrefix(strings.TrimSpace(raw), "[") {
			return k.decode(json.RawMessage(raw))
		}
		var out []string
		for _, s := range strings.Split(raw, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out, nil
	case KindObject:
		return k.decode(json.RawMessage(raw))
	}
	return nil, fmt.Errorf("unsupported kind")
}

// decode reads a value from its JSON form in the config file.
func (k Key) decode(raw json.RawMessage) (any, error) {
	wrongType := fmt.Errorf("expected %s, got %s", article(k.Kind), jsonKind(raw))
	if string(bytes.TrimSpace(raw)) == "null" {
		// json.Unmarshal would take null as "leave the zero value", turning
		// "retries": null into 0 and "queue_sync": null into false.
		return nil, fmt.Errorf("expected %s, got null (remove the key to use the default)", article(k.Kind))
	}
	switch k.Kind {
	case KindString:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, wrongType
		}
		return s, nil
	case KindInt:
		var f float64
		if json.Unmarshal(raw, &f) != nil {
			return nil, wrongType
		}
		if f != float64(int(f)) {
			return nil, fmt.Errorf("expected an integer, got %s", raw)
		}
		if _, err := checkNumber[int](f, string(raw)); err != nil {
			return nil, err
		}
		return int(f), nil
	case KindFloat:
		var f float64
		if json.Unmarshal(raw, &f) != nil {
			return nil, wrongType
		}
		return checkNumber[float64](f, string(raw))
	case KindBool:
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return nil, wrongType
		}
		return b, nil
	case KindDuration:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, fmt.Errorf(`expected a duration string such as "30s", got %s`, jsonKind(raw))
		}
		return k.parse(s)
	case KindStrings:
		var ss []string
		if json.Unmarshal(raw, &ss) != nil {
			return nil, wrongType
		}
		if ss == nil {
			ss = []string{}
		}
		return ss, nil
	case KindObject:
		if jsonKind(raw) != "an object" {
			return nil, wrongType
		}
		return json.RawMessage(bytes.Clone(raw)), nil
	}
	return nil, errors.New("unsupported kind")
}

func article(k Kind) string {
	switch k {
	case KindInt:
		return "an integer"
	case KindObject:
		return "an object"
	case KindStrings:
		return "a list of strings"
	}
	return "a " + k.String()
}

func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
