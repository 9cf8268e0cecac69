// Package config resolves powerglide's configuration in layers:
// command-line flags > environment > the config file > built-in defaults.
// Every resolved value remembers the layer it came from, and a layer that
// sets a key — even to its default value — wins over the layers below it.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/secrets"
)

// Source names the layer a value came from.
type Source string

const (
	SourceDefault Source = "default"
	SourceFile    Source = "file"
	SourceEnv     Source = "env"
	SourceFlag    Source = "flag"
)

// Value is one resolved key.
type Value struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Source Source `json:"source"`
	Origin string `json:"origin,omitempty"` // file:line, variable name or --flag
	Secret bool   `json:"-"`
}

// Config is a resolved configuration.
type Config struct {
	File   string // the config file consulted (it may not exist)
	values map[string]Value
	// named is set when $POWERGLIDE_CONFIG names File: a file the user
	// named must exist, a default path need not.
	named bool
}

// Options are the inputs of Load.
type Options struct {
	// LookupEnv reads the environment; nil means an empty environment.
	LookupEnv func(string) (string, bool)
	// Flags holds the raw values of config-backed flags given on the command
	// line, by key name.
	Flags map[string]string
	// FlagNames names the flag that set a key (without dashes), for errors
	// and for `config`; a key missing here is shown as --<key with dashes>.
	FlagNames map[string]string
	// File overrides the config file path; otherwise $POWERGLIDE_CONFIG,
	// then $XDG_CONFIG_HOME/powerglide/config.json, then
	// ~/.config/powerglide/config.json. Only a file $POWERGLIDE_CONFIG
	// names must exist: elsewhere a missing file means no file.
	File string
}

// Load resolves every registered key.
func Load(opts Options) (*Config, error) {
	env := opts.LookupEnv
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	c := &Config{File: opts.File, values: map[string]Value{}}
	if c.File == "" {
		c.File = DefaultFile(env)
		p, ok := env("POWERGLIDE_CONFIG")
		c.named = ok && p != ""
	}
	for _, k := range keys {
		c.values[k.Name] = Value{Key: k.Name, Value: k.defaultValue(env), Source: SourceDefault, Secret: k.Secret}
	}
	if err := c.loadFile(); err != nil {
		return nil, err
	}
	for _, k := range keys {
		for _, name := range k.Env {
			raw, ok := env(name)
			if !ok || raw == "" {
				continue
			}
			v, err := k.parse(raw)
			if err != nil {
				return nil, &InputError{Where: "environment variable " + name, Key: k.Name, Err: err}
			}
			c.values[k.Name] = Value{Key: k.Name, Value: v, Source: SourceEnv, Origin: name, Secret: k.Secret}
			break
		}
	}
	for name, raw := range opts.Flags {
		k, ok := Lookup(name)
		if !ok {
			return nil, fmt.Errorf("config: flag bound to unknown key %q", name)
		}
		flag := opts.FlagNames[name]
		if flag == "" {
			flag = strings.ReplaceAll(name, "_", "-")
		}
		v, err := k.parse(raw)
		if err != nil {
			return nil, &InputError{Where: "flag --" + flag, Key: name, Err: err}
		}
		c.values[name] = Value{Key: name, Value: v, Source: SourceFlag, Origin: "--" + flag, Secret: k.Secret}
	}
	return c, nil
}

// DefaultFile returns the config file path for an environment.
func DefaultFile(env func(string) (string, bool)) string {
	if p, ok := env("POWERGLIDE_CONFIG"); ok && p != "" {
		return p
	}
	if x, ok := env("XDG_CONFIG_HOME"); ok && x != "" {
		return filepath.Join(x, "powerglide", "config.json")
	}
	home, _ := env("HOME")
	return filepath.Join(home, ".config", "powerglide", "config.json")
}

func (c *Config) loadFile() error {
	data, err := os.ReadFile(c.File)
	if os.IsNotExist(err) && c.named {
		// A typo in $POWERGLIDE_CONFIG would otherwise run on the
		// defaults without a word.
		return &InputError{Where: c.File, Err: errors.New("no such file ($POWERGLIDE_CONFIG names it)")}
	}
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return &InputError{Where: c.File, Err: err}
	}
	entries, err := parseFile(c.File, data)
	if err != nil {
		return err
	}
	for _, e := range entries {
		k, _ := Lookup(e.key)
		v, err := k.decode(e.raw)
		if err != nil {
			return &InputError{Where: fmt.Sprintf("%s:%d", c.File, e.line), Key: e.key, Err: err}
		}
		c.values[e.key] = Value{Key: e.key, Value: v, Source: SourceFile, Origin: fmt.Sprintf("%s:%d", c.File, e.line), Secret: k.Secret}
	}
	return nil
}

// Get returns the resolved value of key; it panics on an unregistered key,
// which is a programming error.
func (c *Config) Get(key string) Value {
	v, ok := c.values[key]
	if !ok {
		panic("config: unknown key " + key)
	}
	return v
}

// String returns a string-valued key.
func (c *Config) String(key string) string { s, _ := c.Get(key).Value.(string); return s }

// Int returns an integer-valued key.
func (c *Config) Int(key string) int { n, _ := c.Get(key).Value.(int); return n }

// Float returns a number-valued key.
func (c *Config) Float(key string) float64 { f, _ := c.Get(key).Value.(float64); return f }

// Bool returns a boolean key.
func (c *Config) Bool(key string) bool { b, _ := c.Get(key).Value.(bool); return b }

// Duration returns a duration key.
func (c *Config) Duration(key string) time.Duration {
	d, _ := c.Get(key).Value.(time.Duration)
	return d
}

// Strings returns a string-list key.
func (c *Config) Strings(key string) []string { s, _ := c.Get(key).Value.([]string); return s }

// Decode unmarshals an object-valued key into v.
func (c *Config) Decode(key string, v any) error {
	raw, _ := c.Get(key).Value.(json.RawMessage)
	if len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &InputError{Where: c.Get(key).Origin, Key: key, Err: err}
	}
	return nil
}

// All returns every resolved value, sorted by key.
func (c *Config) All() []Value {
	out := make([]Value, 0, len(c.values))
	for _, v := range c.values {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Display renders a value for people, hiding secrets.
func (v Value) Display() string {
	if v.Secret {
		if raw, ok := v.Value.(json.RawMessage); ok {
			return string(maskObject(raw))
		}
		if s, _ := v.Value.(string); s != "" {
			return "<set>"
		}
		return ""
	}
	if v.Key == "store" {
		s, _ := v.Value.(string)
		return RedactURL(s)
	}
	switch x := v.Value.(type) {
	case json.RawMessage:
		return string(x)
	case []string:
		b, _ := json.Marshal(x)
		return string(b)
	case time.Duration:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

// InputError is bad configuration input: it names where the value came
// from and the key, and maps to exit 2.
type InputError struct {
	Where string // file:line, env variable or flag
	Key   string
	Err   error
}

func (e *InputError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("config %s: %v", e.Where, e.Err)
	}
	return fmt.Sprintf("config %s: key %q: %v", e.Where, e.Key, e.Err)
}

func (e *InputError) Unwrap() error { return e.Err }

// BadInput marks the error as a usage error (exit 2).
func (e *InputError) BadInput() bool { return true }

// Secrets returns what the configuration holds that must never be written
// out: the values of secret keys (named by their variable when set in the
// environment) and string fields named like secrets inside object keys,
// such as a provider's "api_key". Callers register them for redaction.
func (c *Config) Secrets() []secrets.Secret {
	var out []secrets.Secret
	for _, name := range slices.Sorted(maps.Keys(c.values)) {
		v := c.values[name]
		switch val := v.Value.(type) {
		case string:
			if name == "store" {
				if p := URLPassword(val); p != "" {
					out = append(out, secrets.Secret{Name: "store password", Value: p})
				}
			}
			if v.Secret && val != "" {
				n := name
				if v.Source == SourceEnv {
					n = v.Origin
				}
				out = append(out, secrets.Secret{Name: n, Value: val})
			}
		case json.RawMessage:
			var obj any
			if json.Unmarshal(val, &obj) == nil {
				if v.Secret {
					out = appendStrings(out, name, obj)
				} else {
					out = appendSecretFields(out, name, obj)
				}
			}
		}
	}
	return out
}

// appendSecretFields collects the string fields named like secrets in a
// decoded JSON value, named by their path (providers.ollama.api_key).
func appendSecretFields(out []secrets.Secret, path string, v any) []secrets.Secret {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			p := path + "." + k
			if s, ok := x[k].(string); ok && secrets.IsSecretName(k) {
				out = append(out, secrets.Secret{Name: p, Value: s})
				continue
			}
			out = appendSecretFields(out, p, x[k])
		}
	case []any:
		for i, e := range x {
			out = appendSecretFields(out, fmt.Sprintf("%s.%d", path, i), e)
		}
	}
	return out
}

// appendStrings collects every string of a secret object key (mcp_headers)
// but references to variables (${NAME}), which hold no secret themselves.
func appendStrings(out []secrets.Secret, path string, v any) []secrets.Secret {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "${") {
			out = append(out, secrets.Secret{Name: path, Value: x})
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			out = appendStrings(out, path+"."+k, x[k])
		}
	case []any:
		for i, e := range x {
			out = appendStrings(out, fmt.Sprintf("%s.%d", path, i), e)
		}
	}
	return out
}

// maskObject shows a secret object with its strings replaced by "<set>",
// but references to variables (${NAME}), which hold no secret themselves.
func maskObject(raw json.RawMessage) json.RawMessage {
	var obj any
	if len(raw) == 0 || json.Unmarshal(raw, &obj) != nil {
		return json.RawMessage("{}")
	}
	var mask func(any) any
	mask = func(v any) any {
		switch x := v.(type) {
		case string:
			if strings.Contains(x, "${") {
				return x
			}
			return "<set>"
		case map[string]any:
			for k, e := range x {
				x[k] = mask(e)
			}
		case []any:
			for i, e := range x {
				x[i] = mask(e)
			}
		}
		return v
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(mask(obj)) != nil {
		return json.RawMessage("{}")
	}
	return bytes.TrimSpace(b.Bytes())
}
