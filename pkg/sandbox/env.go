package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// EnvAllowed are the variables commands get from pg-tool's environment:
// what programs need to find themselves, speak the user's language and
// share the build caches. Anything else (API keys, tokens, cloud
// credentials) is dropped unless named with --pass-env.
var EnvAllowed = []string{
	"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "COLORTERM", "SHELL", "TZ", "TMPDIR",
	"GOCACHE", "GOPATH", "GOMODCACHE", "GOFLAGS", "GOROOT", "GOTOOLCHAIN", "GOPROXY", "GOSUMDB", "GONOSUMDB",
	"GOPRIVATE", "GONOPROXY", "GOENV", "GOWORK", "CGO_ENABLED",
	"npm_config_cache", "NPM_CONFIG_CACHE", "PIP_CACHE_DIR", "CARGO_HOME", "RUSTUP_HOME",
	"XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
}

// envAllowed reports whether a variable passes the allow-list (LC_* too).
func envAllowed(name string, pass []string) bool {
	return strings.HasPrefix(name, "LC_") || slices.Contains(EnvAllowed, name) || slices.Contains(pass, name)
}

// Env is the environment of a command: the variables of environ that are
// allowed or named in pass, with TMPDIR pointing at the private temporary
// directory when there is one.
func (sb *Sandbox) Env(environ, pass []string) []string {
	tmp := sb.TempDir()
	out := make([]string, 0, 24)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == "TMPDIR" && tmp != "" {
			continue
		}
		if envAllowed(name, pass) {
			out = append(out, kv)
		}
	}
	if tmp != "" {
		out = append(out, "TMPDIR="+tmp)
	}
	return out
}

// EnvNames lists the names of an environment's variables.
func EnvNames(env []string) []string {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Caches are the build caches commands may write in workspace-write mode,
// from the environment's variables or their defaults under home: the Go
// build and module caches, ~/.cache (pip and most XDG tools), npm's cache
// and Cargo's registry. ~/.cache is created when missing, as the tools
// would.
func Caches(getenv func(string) string, home string) []string {
	or := func(v, def string) string {
		if v != "" {
			return v
		}
		return def
	}
	xdg := or(getenv("XDG_CACHE_HOME"), filepath.Join(home, ".cache"))
	gopath := filepath.Join(home, "go")
	if gp := getenv("GOPATH"); gp != "" {
		gopath = filepath.SplitList(gp)[0]
	}
	cargo := or(getenv("CARGO_HOME"), filepath.Join(home, ".cargo"))
	caches := []string{
		xdg,
		or(getenv("GOCACHE"), filepath.Join(xdg, "go-build")),
		or(getenv("GOMODCACHE"), filepath.Join(gopath, "pkg", "mod")),
		or(getenv("npm_config_cache"), or(getenv("NPM_CONFIG_CACHE"), filepath.Join(home, ".npm"))),
		or(getenv("PIP_CACHE_DIR"), filepath.Join(xdg, "pip")),
		filepath.Join(cargo, "registry"),
		filepath.Join(cargo, "git"),
	}
	if home != "" {
		_ = os.MkdirAll(xdg, 0o755)
	}
	var out []string
	for _, c := range caches {
		if c != "" && filepath.IsAbs(c) {
			out = append(out, filepath.Clean(c))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
