package secrets

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzRedact: whatever surrounds a secret, the redacted text never holds
// it, redacting twice changes nothing more, and the stream writer fed in
// two pieces lets none of it through either.
func FuzzRedact(f *testing.F) {
	const value = "fuzz-secret-value-77"
	r := New(Secret{Name: "FUZZ_TOKEN", Value: value})
	f.Add("before ", " after", 3)
	f.Add(`{"x":"`, `"}`, 0)
	f.Add("Bearer ", "sk-ant-", 10)
	f.Fuzz(func(t *testing.T, before, after string, split int) {
		text := before + value + after
		out := r.String(text)
		if strings.Contains(out, value) {
			t.Fatalf("%q redacted to %q", text, out)
		}
		if again := r.String(out); again != out {
			t.Fatalf("not idempotent: %q then %q", out, again)
		}
		var buf bytes.Buffer
		w := r.NewWriter(&buf)
		split = min(max(split, 0), len(text))
		w.Write([]byte(text[:split]))
		w.Write([]byte(text[split:]))
		w.Flush()
		if strings.Contains(buf.String(), value) {
			t.Fatalf("the writer let %q through: %q", value, buf.String())
		}
	})
}
