package loop

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// distinctText is the i-th of many distinct tool outputs of about n bytes.
func distinctText(i, n int) string {
	return strings.Repeat("line of build output ", n/21) + fmt.Sprint(i)
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// An estimator that counts with a tokenizer remembers counts, not the
// texts: a long run counts thousands of tool outputs that compaction
// dropped long ago (F16: 15 -> 260 MB over 3,000 steps).
func TestEstimatorKeepsNoText(t *testing.T) {
	e := NewEstimator("openai/gpt-4o")
	if e.Tokenizer() != "o200k_base" {
		t.Fatalf("tokenizer %s", e.Tokenizer())
	}
	const texts, size = 400, 32 << 10 // 12.5 MiB of text
	before := heapInUse()
	for i := range texts {
		s := distinctText(i, size)
		if n := e.Text(s); n <= 0 {
			t.Fatalf("text %d counted %d", i, n)
		}
		if n, again := e.Text(s), e.Text(s); n != again {
			t.Fatalf("text %d counted %d then %d", i, n, again)
		}
	}
	grown := int64(heapInUse()) - int64(before)
	t.Logf("%d texts of %d KiB counted: heap grew %.2f MiB", texts, size>>10, float64(grown)/(1<<20))
	if grown > 2<<20 {
		t.Fatalf("the estimator holds %.1f MiB after counting %d texts of %d KiB: it keeps the texts", float64(grown)/(1<<20), texts, size>>10)
	}
	runtime.KeepAlive(e)
}

// BenchmarkEstimatorDistinctTexts counts a new 20 KB tool output per
// step, as a long run with an OpenAI model does; retained-B/op is the heap
// the estimator keeps per text counted.
func BenchmarkEstimatorDistinctTexts(b *testing.B) {
	e := NewEstimator("openai/gpt-4o")
	texts := make([]string, 64)
	for i := range texts {
		texts[i] = distinctText(i, 20000)
	}
	before := heapInUse()
	b.ResetTimer()
	for i := range b.N {
		// A new string each step (as a tool output is), same content
		// cycling so the tokenizer's cost stays out of the figure.
		s := strings.Clone(texts[i%len(texts)][:len(texts[0])-1]) + fmt.Sprint(i)
		e.Text(s)
	}
	b.StopTimer()
	b.ReportMetric(float64(int64(heapInUse())-int64(before))/float64(b.N), "retained-B/op")
	runtime.KeepAlive(e)
}
