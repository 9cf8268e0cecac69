// Package secrets keeps key material out of what powerglide writes: it
// knows which environment variables hold secrets, scrubs them from the
// environment of child processes, and redacts their values — and strings
// shaped like well-known keys — from text, replacing each with
// [redacted:NAME].
//
// Redaction is built for the hot path: a text with nothing to redact
// costs a few SIMD substring scans (one per known value, one per key
// prefix) and no allocation; only a hit runs the replacer or the shape
// matcher at the hit.
package secrets

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// MinLen is the shortest value redacted by value: shorter values of
// secret-named variables (a flag "1", a mode "on") would shred ordinary
// text and are no secrets worth the name.
const MinLen = 8

// secretWords mark a variable name as holding a secret.
var secretWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE"}

// providerPrefixes mark the variables of model providers and clouds, all
// of which are treated as secret unless they name a location.
var providerPrefixes = []string{"ANTHROPIC_", "OPENAI_", "OPENROUTER_", "GEMINI_", "GOOGLE_API", "GROQ_", "MISTRAL_", "COHERE_", "DEEPSEEK_", "XAI_", "TOGETHER_", "FIREWORKS_", "HF_", "HUGGINGFACE_", "AZURE_OPENAI_", "AWS_"}

// notSecretSuffixes name locations and choices, not credentials, even for
// a provider: ANTHROPIC_BASE_URL, AWS_REGION.
var notSecretSuffixes = []string{"_BASE_URL", "_URL", "_REGION", "_DEFAULT_REGION", "_PROFILE", "_MODEL", "_ORG_ID", "_ORGANIZATION"}

// IsSecretName reports whether an environment variable of that name holds
// a secret: named like *KEY*, *TOKEN*, *SECRET*, *PASSWORD* (any case), or
// a model provider's or cloud's variable other than a URL or region.
func IsSecretName(name string) bool {
	u := strings.ToUpper(name)
	// powerglide's own settings hold no secret (its keys come in the
	// providers' variables), and POWERGLIDE_BUDGET_TOKENS is a count.
	if strings.HasPrefix(u, "POWERGLIDE_") {
		return false
	}
	for _, w := range secretWords {
		if i := strings.Index(u, w); i >= 0 && !strings.HasPrefix(u[i:], "TOKENS") {
			return true
		}
	}
	for _, p := range providerPrefixes {
		if strings.HasPrefix(u, p) {
			for _, s := range notSecretSuffixes {
				if strings.HasSuffix(u, s) {
					return false
				}
			}
			return true
		}
	}
	return false
}

// ScrubEnv returns env (NAME=VALUE entries) without the variables named
// like secrets, except those listed in keep.
func ScrubEnv(env []string, keep ...string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if IsSecretName(name) && !contains(keep, name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Secret is a value to redact and the name it is redacted as.
type Secret struct {
	Name  string
	Value string
}

// FromEnv returns the secrets of an environment (NAME=VALUE entries): the
// values of variables named like secrets that could be one (see
// Redactable).
func FromEnv(env []string) []Secret {
	var out []Secret
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if ok && IsSecretName(name) && Redactable(value) {
			out = append(out, Secret{Name: name, Value: value})
		}
	}
	return out
}

// Redactable reports whether a value is worth redacting wherever it
// appears: at least MinLen long and not a plain number (a limit, a port,
// an id), which would shred ordinary output and hides nothing.
func Redactable(v string) bool {
	if len(v) < MinLen {
		return false
	}
	return strings.TrimLeft(v, "0123456789") != ""
}

// Redactor replaces secret values and key-shaped strings. The zero value
// and nil redact key shapes only.
type Redactor struct {
	values []string // every form of every value
	pre    *prefilter
}

// New returns a redactor of the given secrets (values that are not
// Redactable are ignored; a value given twice keeps its first name).
func New(list ...Secret) *Redactor {
	type form struct{ text, name string }
	var forms []form
	seen := map[string]bool{}
	for _, s := range list {
		if !Redactable(s.Value) {
			continue
		}
		for _, f := range encodings(s.Value) {
			if !seen[f] {
				seen[f] = true
				forms = append(forms, form{f, s.Name})
			}
		}
	}
	if len(forms) == 0 {
		return &Redactor{}
	}
	r := &Redactor{}
	var marks []string
	for _, f := range forms {
		r.values = append(r.values, f.text)
		marks = append(marks, Mark(f.name))
	}
	r.pre = newPrefilter(r.values, marks)
	return r
}

// Mark is the text that replaces a secret called name.
func Mark(name string) string { return "[redacted:" + name + "]" }

// encodings are the forms a value takes in what powerglide writes: as is,
// and inside a JSON string (with and without HTML escaping), so a value
// holding a quote or a backslash is still found in a JSON line.
func encodings(v string) []string {
	forms := []string{v}
	for _, html := range []bool{false, true} {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(v) != nil {
			continue
		}
		s := strings.TrimSuffix(b.String(), "\n")
		s = s[1 : len(s)-1]
		if !contains(forms, s) {
			forms = append(forms, s)
		}
	}
	return forms
}

// String returns s with every secret replaced; s itself when there is
// nothing to replace.
func (r *Redactor) String(s string) string {
	p := r.prefilter()
	if value, shape := p.scan(s); !value && !shape {
		return s
	}
	return p.replace(s)
}

// Bytes returns b with every secret replaced; b itself (not a copy) when
// there is nothing to replace.
func (r *Redactor) Bytes(b []byte) []byte {
	if !r.Has(b) {
		return b
	}
	return []byte(r.String(string(b)))
}

// Has reports whether b holds a secret value or a key-shaped string.
func (r *Redactor) Has(b []byte) bool {
	value, shape := r.prefilter().scan(unsafeString(b))
	return value || shape
}

func (r *Redactor) prefilter() *prefilter {
	if r == nil || r.pre == nil {
		return shapeOnly
	}
	return r.pre
}

// Values returns how many secret values (in all their forms) r knows.
func (r *Redactor) Values() int {
	if r == nil {
		return 0
	}
	return len(r.values)
}

// The process-wide redactor: the secrets of the process's environment
// plus those registered (e.g. API keys from the config file).
var (
	procOnce  sync.Once
	procMu    sync.Mutex
	procExtra []Secret
	procRed   atomic.Pointer[Redactor]
)

// Default returns the process-wide redactor, built from os.Environ at its
// first use and rebuilt by Register.
func Default() *Redactor {
	procOnce.Do(func() {
		procMu.Lock()
		defer procMu.Unlock()
		procRed.Store(New(FromEnv(os.Environ())...))
	})
	return procRed.Load()
}

// Register adds secrets to the process-wide redactor.
func Register(list ...Secret) {
	Default()
	procMu.Lock()
	defer procMu.Unlock()
	n := len(procExtra)
	for _, s := range list {
		if Redactable(s.Value) && !slices.Contains(procExtra, s) {
			procExtra = append(procExtra, s)
		}
	}
	if len(procExtra) == n {
		return
	}
	procRed.Store(New(append(FromEnv(os.Environ()), procExtra...)...))
}

// Redact redacts b with the process-wide redactor.
func Redact(b []byte) []byte { return Default().Bytes(b) }

// RedactString redacts s with the process-wide redactor.
func RedactString(s string) string { return Default().String(s) }
