package secrets

import (
	"strings"
	"testing"
)

// benchText is a typical tool output: source code and test logs, no key.
var benchText = strings.Repeat("func TestQueue(t *testing.T) { q := newQueue(); if err := q.Add(task); err != nil { t.Fatal(err) } } // ok  github.com/powerglide/powerglide/pkg/queue 0.412s\n", 300)

func benchRedactor() *Redactor {
	return New(FromEnv([]string{
		"ANTHROPIC_API_KEY=" + fakeAnthropic, "OPENAI_API_KEY=" + fakeOpenAI, "GITHUB_TOKEN=" + fakeGitHub,
		"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "DB_PASSWORD=hunter2hunter2",
	})...)
}

// BenchmarkRedactClean: the common case, a 40 kB output with no secret.
func BenchmarkRedactClean(b *testing.B) {
	r := benchRedactor()
	in := []byte(benchText)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r.Bytes(in)
	}
}

// BenchmarkRedactLine: one short JSON event line, as the journal appends.
func BenchmarkRedactLine(b *testing.B) {
	r := benchRedactor()
	in := []byte(`{"type":"tool_result","ts":"2026-11-25T14:00:00Z","id":"c-12","name":"bash","ok":true,"output":"ok  pkg/queue 0.4s\n"}` + "\n")
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r.Bytes(in)
	}
}

// BenchmarkRedactHit: the same output with a value and a shape in it.
func BenchmarkRedactHit(b *testing.B) {
	r := benchRedactor()
	in := []byte(benchText + "key=" + fakeAnthropic + " id " + fakeAWS + "\n" + benchText)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r.Bytes(in)
	}
}

// BenchmarkWriter: a terminal stream in 4 kB chunks.
func BenchmarkWriter(b *testing.B) {
	r := benchRedactor()
	in := []byte(benchText)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		w := r.NewWriter(discard{})
		for i := 0; i < len(in); i += 4096 {
			w.Write(in[i:min(i+4096, len(in))])
		}
		w.Flush()
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
