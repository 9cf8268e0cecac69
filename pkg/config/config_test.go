package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func envFunc(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPrecedence walks the precedence table case by case: flags > env >
// file > defaults, including layers that set a key to its default value.
func TestPrecedence(t *testing.T) {
	const def = 4 // the default of "retries"
	cases := []struct {
		name   string
		file   string // value in the config file, "" for none
		env    string // POWERGLIDE_RETRIES, "" for unset
		flag   string // --retries, "" for not given
		want   int
		source Source
	}{
		{"default only", "", "", "", def, SourceDefault},
		{"file over default", "7", "", "", 7, SourceFile},
		{"env over file", "7", "8", "", 8, SourceEnv},
		{"flag over env", "7", "8", "9", 9, SourceFlag},
		{"flag over file", "7", "", "9", 9, SourceFlag},
		{"env over default", "", "8", "", 8, SourceEnv},
		{"file set to the default still wins", "4", "", "", def, SourceFile},
		{"env set to the default wins over file", "7", "4", "", def, SourceEnv},
		{"flag set to the default wins over env", "7", "8", "4", def, SourceFlag},
		{"flag set to the default wins over file", "7", "", "4", def, SourceFlag},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"HOME": t.TempDir()}
			opts := Options{Flags: map[string]string{}}
			if c.file != "" {
				opts.File = writeConfig(t, `{"retries": `+c.file+`}`)
			} else {
				opts.File = filepath.Join(t.TempDir(), "absent.json")
			}
			if c.env != "" {
				env["POWERGLIDE_RETRIES"] = c.env
			}
			if c.flag != "" {
				opts.Flags["retries"] = c.flag
			}
			opts.LookupEnv = envFunc(env)
			cfg, err := Load(opts)
			if err != nil {
				t.Fatal(err)
			}
			v := cfg.Get("retries")
			if cfg.Int("retries") != c.want || v.Source != c.source {
				t.Fatalf("retries = %v from %s, want %d from %s", v.Value, v.Source, c.want, c.source)
			}
		})
	}
}

func TestFileLocations(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HOME": "/h"}, "/h/.config/powerglide/config.json"},
		{map[string]string{"HOME": "/h", "XDG_CONFIG_HOME": "/x"}, "/x/powerglide/config.json"},
		{map[string]string{"HOME": "/h", "XDG_CONFIG_HOME": "/x", "POWERGLIDE_CONFIG": "/c.json"}, "/c.json"},
	}
	for _, c := range cases {
		if got := DefaultFile(envFunc(c.env)); got != c.want {
			t.Errorf("%v: %s, want %s", c.env, got, c.want)
		}
	}
}

func TestKindsAndSources(t *testing.T) {
	p := writeConfig(t, `{
  "home": "/data",
  "timeout": "90s",
  "mcp": ["fs=npx server-filesystem /tmp"],
  "providers": {"ollama": {"kind": "openai-compatible", "base_url": "http://localhost:11434/v1"}}
}`)
	cfg, err := Load(Options{File: p, LookupEnv: envFunc(map[string]string{
		"HOME": "/h", "ANTHROPIC_API_KEY": "sk-secret", "POWERGLIDE_MCP": "a=x,b=y",
	})})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.String("home") != "/data" || cfg.Get("home").Origin != p+":2" {
		t.Errorf("home: %+v", cfg.Get("home"))
	}
	if cfg.Duration("timeout") != 90*time.Second {
		t.Errorf("timeout: %v", cfg.Duration("timeout"))
	}
	if got := cfg.Strings("mcp"); len(got) != 2 || got[1] != "b=y" {
		t.Errorf("mcp from env: %v", got)
	}
	var prov map[string]struct {
		Kind    string `json:"kind"`
		BaseURL string `json:"base_url"`
	}
	if err := cfg.Decode("providers", &prov); err != nil || prov["ollama"].BaseURL != "http://localhost:11434/v1" {
		t.Errorf("providers: %v %+v", err, prov)
	}
	if v := cfg.Get("anthropic_api_key"); v.Display() != "<set>" || v.Source != SourceEnv || v.Origin != "ANTHROPIC_API_KEY" {
		t.Errorf("secret: %+v %q", v, v.Display())
	}
	home := Value{Value: "/h/.powerglide"}
	if d, _ := Load(Options{File: "/nonexistent", LookupEnv: envFunc(map[string]string{"HOME": "/h"})}); d.String("home") != home.Value {
		t.Errorf("default home: %s", d.String("home"))
	}
}

func TestBrokenFiles(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"syntax", "{\n  \"model\": \"x\",\n  \"retries\": 3,,\n}", `:3: after key "retries": invalid JSON`},
		{"syntax in a value", "{\n  \"model\": \"x\",\n  \"retries\": 3x\n}", `:3: after key "retries": invalid JSON`},
		{"null int", "{\"retries\": null}", `key "retries": expected an integer, got null (remove the key to use the default)`},
		{"null bool", "{\"queue_sync\": null}", `key "queue_sync": expected a boolean, got null`},
		{"null string", "{\n\"model\": null}", `:2: key "model": expected a string, got null`},
		{"unknown key", "{\n  \"model\": \"x\",\n  \"modle\": \"y\"\n}", `:3: key "modle": unknown key`},
		{"wrong type", "{\n\n  \"retries\": \"three\"\n}", `:3: key "retries": expected an integer, got a string`},
		{"bad duration", "{\"timeout\": \"soon\"}", `:1: key "timeout": expected a duration`},
		{"not an object", "[1,2]", `:1: the file must hold one JSON object`},
		{"truncated", "{\n  \"model\": \"x\"", `invalid JSON`},
		{"trailing", "{}\n{}", `:2: unexpected data after the JSON object`},
		{"twice", "{\"model\": \"a\",\n\"model\": \"b\"}", `:2: key "model": key set twice`},
		{"object kind", "{\"providers\": [1]}", `key "providers": expected an object, got an array`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeConfig(t, c.body)
			_, err := Load(Options{File: p, LookupEnv: envFunc(map[string]string{"HOME": "/h"})})
			var ie *InputError
			if !errors.As(err, &ie) || !ie.BadInput() {
				t.Fatalf("want a bad-input error, got %v", err)
			}
			if !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not name the file and %q", err, c.want)
			}
		})
	}
}

func TestEmptyFileSetsNothing(t *testing.T) {
	p := writeConfig(t, " \n")
	c, err := Load(Options{File: p, LookupEnv: envFunc(map[string]string{"HOME": "/h"})})
	if err != nil {
		t.Fatal(err)
	}
	if v := c.Get("retries"); v.Source != SourceDefault {
		t.Fatalf("retries from %s, want the default", v.Source)
	}
}

func TestBadEnvAndFlag(t *testing.T) {
	_, err := Load(Options{File: "/nonexistent", LookupEnv: envFunc(map[string]string{"POWERGLIDE_RETRIES": "lots"})})
	if err == nil || !strings.Contains(err.Error(), "environment variable POWERGLIDE_RETRIES") {
		t.Fatalf("env: %v", err)
	}
	_, err = Load(Options{File: "/nonexistent", Flags: map[string]string{"timeout": "x"}})
	if err == nil || !strings.Contains(err.Error(), "flag --timeout") {
		t.Fatalf("flag: %v", err)
	}
	// The error and the origin name the flag the user typed, not the key.
	flags, names := map[string]string{"monitor_heartbeat": "soon"}, map[string]string{"monitor_heartbeat": "heartbeat"}
	_, err = Load(Options{File: "/nonexistent", Flags: flags, FlagNames: names})
	if err == nil || !strings.Contains(err.Error(), "flag --heartbeat:") {
		t.Fatalf("named flag: %v", err)
	}
	flags["monitor_heartbeat"] = "2s"
	c, err := Load(Options{File: "/nonexistent", Flags: flags, FlagNames: names})
	if err != nil || c.Get("monitor_heartbeat").Origin != "--heartbeat" {
		t.Fatalf("origin: %v %+v", err, c.Get("monitor_heartbeat"))
	}
}

func FuzzConfigFile(f *testing.F) {
	f.Add([]byte(`{"model":"a","retries":3,"timeout":"1s","mcp":["x"],"providers":{}}`))
	f.Add([]byte("{\n\"retries\": \"x\"}"))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parseFile("f.json", data)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error of the wrong type: %T %v", err, err)
			}
			return
		}
		for _, e := range entries {
			if _, ok := Lookup(e.key); !ok || e.line < 1 {
				t.Fatalf("bad entry %+v", e)
			}
		}
	})
}

// Negative, NaN and infinite numbers and out-of-range durations are errors
// in every layer: no key counts or measures something negative, and a
// duration past 100 years would overflow a deadline taken from now.
func TestNumbersOutOfRange(t *testing.T) {
	cases := []struct{ key, env, file, msg string }{
		{"POWERGLIDE_BUDGET_USD", "NaN", "", "finite"},
		{"POWERGLIDE_BUDGET_USD", "-Inf", "", "finite"},
		{"POWERGLIDE_BUDGET_USD", "-5", "", "not negative"},
		{"POWERGLIDE_RETRIES", "-1", "", "not negative"},
		{"POWERGLIDE_LEASE", "2562047h", "", "out of range"},
		{"POWERGLIDE_LEASE", "-10m", "", "not negative"},
		{"", "", `{"loop_budget_usd": -0.5}`, "not negative"},
		{"", "", `{"max_tokens": -100}`, "not negative"},
		{"", "", `{"lease": "999999h"}`, "out of range"},
		{"", "", `{"loop_budget_usd": 1e999}`, ""}, // not even JSON's float64
	}
	for _, c := range cases {
		env := map[string]string{"HOME": t.TempDir()}
		opts := Options{File: filepath.Join(t.TempDir(), "absent.json")}
		if c.key != "" {
			env[c.key] = c.env
		}
		if c.file != "" {
			opts.File = writeConfig(t, c.file)
		}
		opts.LookupEnv = envFunc(env)
		_, err := Load(opts)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s=%s %s: err %v, want one saying %q", c.key, c.env, c.file, err, c.msg)
		}
	}
	// The bounds themselves are fine.
	env := map[string]string{"HOME": t.TempDir(), "POWERGLIDE_LEASE": "876000h", "POWERGLIDE_BUDGET_USD": "0"}
	cfg, err := Load(Options{File: filepath.Join(t.TempDir(), "absent.json"), LookupEnv: envFunc(env)})
	if err != nil || cfg.Duration("lease") != MaxDuration {
		t.Fatalf("876000h: %v %v", cfg, err)
	}
}

// Secrets: the secret keys' values (named by their variable when set in
// the environment) and secret-named fields of object keys, for redaction.
func TestSecrets(t *testing.T) {
	p := writeConfig(t, `{"openai_api_key":"from-the-file-123","providers":{"local":{"kind":"openai-compatible","base_url":"http://x","api_key":"provider-key-456"}}}`)
	c, err := Load(Options{File: p, LookupEnv: envFunc(map[string]string{"HOME": "/h", "ANTHROPIC_API_KEY": "from-the-env-789"})})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range c.Secrets() {
		got = append(got, s.Name+"="+s.Value)
	}
	want := "ANTHROPIC_API_KEY=from-the-env-789 openai_api_key=from-the-file-123 providers.local.api_key=provider-key-456"
	if strings.Join(got, " ") != want {
		t.Fatalf("Secrets() = %q, want %q", got, want)
	}
}

// TestSecretObject: every literal string of mcp_headers is a secret and is
// shown as <set>; a reference to a variable is neither.
func TestSecretObject(t *testing.T) {
	p := writeConfig(t, `{"mcp_headers":{"gh":{"Authorization":"Bearer ${GITHUB_TOKEN}"},"corp":{"X-Trace":"literal-value-42","Cookie":"sid=abcdef123456"}}}`)
	c, err := Load(Options{File: p, LookupEnv: envFunc(map[string]string{"HOME": "/h"})})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range c.Secrets() {
		got = append(got, s.Name+"="+s.Value)
	}
	want := "mcp_headers.corp.Cookie=sid=abcdef123456 mcp_headers.corp.X-Trace=literal-value-42"
	if strings.Join(got, " ") != want {
		t.Fatalf("Secrets() = %q, want %q", got, want)
	}
	shown := c.Get("mcp_headers").Display()
	if shown != `{"corp":{"Cookie":"<set>","X-Trace":"<set>"},"gh":{"Authorization":"Bearer ${GITHUB_TOKEN}"}}` {
		t.Fatalf("Display() = %s", shown)
	}
}
