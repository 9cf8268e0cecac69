package sandbox

import (
	"fmt"
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
// directory when there is one, and the build caches at the sandbox's own
// (Policy.CacheEnv).
func (sb *Sandbox) Env(environ, pass []string) []string {
	tmp := sb.TempDir()
	set := slices.Clone(sb.policy.CacheEnv)
	if tmp != "" {
		set = append(set, "TMPDIR="+tmp)
	}
	isSet := func(name string) bool {
		return slices.ContainsFunc(set, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	}
	out := make([]string, 0, 24)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if envAllowed(name, pass) && !isSet(name) {
			out = append(out, kv)
		}
	}
	return append(out, set...)
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

// Caches makes the sandbox's own build caches in dir (one directory per
// tool, private to the user) and returns them, to be writable, with the
// variables that point the tools at them. The user's own caches, from
// getenv or their defaults under home, stay read-only: a command that
// could write them would plant code (a module's source, a compiled
// package, an npx package, a crate's build.rs) that the user's later,
// unsandboxed builds run. Go still finds the modules the user has
// without the network: GOPROXY tries the user's module cache first
// (file://$GOMODCACHE/cache/download), then the user's GOPROXY.
func Caches(getenv func(string) string, home, dir string) (writable, env []string, err error) {
	or := func(v, def string) string {
		if v != "" {
			return v
		}
		return def
	}
	gopath := filepath.Join(home, "go")
	if gp := getenv("GOPATH"); gp != "" {
		gopath = filepath.SplitList(gp)[0]
	}
	userModCache := or(getenv("GOMODCACHE"), filepath.Join(gopath, "pkg", "mod"))
	own := []struct{ name, sub string }{
		{"GOCACHE", "go-build"},
		{"GOMODCACHE", "go-mod"},
		{"npm_config_cache", "npm"},
		{"PIP_CACHE_DIR", "pip"},
		{"CARGO_HOME", "cargo"},
		{"XDG_CACHE_HOME", "xdg"},
	}
	for _, c := range own {
		d := filepath.Join(dir, c.sub)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, nil, fmt.Errorf("sandbox build caches: %w", err)
		}
		writable = append(writable, d)
		env = append(env, c.name+"="+d)
	}
	proxy := or(getenv("GOPROXY"), "https://proxy.golang.org,direct")
	if filepath.IsAbs(userModCache) {
		proxy = "file://" + filepath.Join(userModCache, "cache", "download") + "," + proxy
	}
	env = append(env, "GOPROXY="+proxy)
	return writable, env, nil
}
