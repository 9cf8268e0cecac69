package loop

import (
	"hash/maphash"
	"strings"
	"sync"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/tiktoken-go/tokenizer/codec"
)

// Token estimates. A model whose tokenizer is known (OpenAI's o200k_base
// family) is counted with it: the vocabulary is compiled into the binary
// (no download) and built on first use, about 20 ms, only by runs of such a
// model. Any other model is counted at bytesPerToken, a ratio measured on
// code, JSON and prose against real tokenizers and set to the dense end
// (code is about 3.5 bytes a token in o200k_base, Claude's tokenizer is
// denser still), so the estimate errs high. Either way the estimate is
// raised (never lowered) when a provider reports more input tokens than
// it said: the calibration.

// bytesPerToken is the ratio of a model without a known tokenizer.
const bytesPerToken = 3.0

// Per-item overheads of a request, in tokens: role and block framing,
// a tool definition's wrapping.
const (
	messageOverhead = 4
	blockOverhead   = 3
	toolOverhead    = 8
	requestOverhead = 16
)

// Estimator estimates the tokens of requests to one model.
type Estimator struct {
	mu     sync.Mutex
	enc    *codec.Codec // nil: the byte ratio
	factor float64      // calibration, ≥ 1
	// cache maps a text's hash to its count. Keyed by the hash, not the
	// text: a key that is the text keeps every text ever counted alive
	// (tool outputs long compacted away), hundreds of MB over a long run.
	cache map[uint64]int
	seed  maphash.Seed
}

// o200kFamily are the model-name prefixes counted with o200k_base.
var o200kFamily = []string{"gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o"}

// tokenizerFor says which tokenizer counts a model ("" for none known).
// Only OpenAI's own models: a local model served through an
// openai-compatible provider has a tokenizer of its own.
func tokenizerFor(model string) string {
	id := strings.TrimSpace(strings.Split(model, ",")[0])
	provider, name, ok := strings.Cut(id, "/")
	if !ok || provider != "openai" {
		return ""
	}
	for _, p := range o200kFamily {
		if strings.HasPrefix(name, p) {
			return "o200k_base"
		}
	}
	return ""
}

var (
	o200kOnce sync.Once
	o200k     *codec.Codec
)

// NewEstimator returns the estimator of a model id (a fallback chain is
// counted for its first model).
func NewEstimator(model string) *Estimator {
	e := &Estimator{factor: 1}
	if tokenizerFor(model) == "o200k_base" {
		o200kOnce.Do(func() { o200k = codec.NewO200kBase() })
		e.enc = o200k
		e.cache = map[uint64]int{}
		e.seed = maphash.MakeSeed()
	}
	return e
}

// Tokenizer names how the estimator counts.
func (e *Estimator) Tokenizer() string {
	if e.enc != nil {
		return e.enc.GetName()
	}
	return "bytes/3"
}

// maxCache bounds the remembered counts; past it the cache starts over.
// An entry is two words whatever the text's length: the cache holds a
// few MB at most.
const maxCache = 1 << 16

// Text estimates the tokens of one text, before calibration.
func (e *Estimator) Text(s string) int {
	if s == "" {
		return 0
	}
	if e.enc == nil {
		return int(float64(len(s))/bytesPerToken) + 1
	}
	// Every text is counted once, not on every step: hashing it costs far
	// less than the tokenizer. Two texts with one 64-bit hash would share
	// a count, an estimate's error of no consequence at that odds.
	h := maphash.String(e.seed, s)
	if n, ok := e.cache[h]; ok {
		return n
	}
	n, err := e.enc.Count(s)
	if err != nil {
		n = int(float64(len(s))/bytesPerToken) + 1
	}
	if len(e.cache) >= maxCache {
		clear(e.cache)
	}
	e.cache[h] = n
	return n
}

// bytesText is Text of JSON bytes (a tool's input or schema), without
// copying them into a string to count them, as every step would.
func (e *Estimator) bytesText(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	if e.enc == nil {
		return int(float64(len(b))/bytesPerToken) + 1
	}
	// maphash.Bytes of b is maphash.String of its string: one entry.
	if n, ok := e.cache[maphash.Bytes(e.seed, b)]; ok {
		return n
	}
	return e.Text(string(b))
}

// Message estimates one message, before calibration.
func (e *Estimator) message(m protocol.Message) int {
	n := messageOverhead
	for _, b := range m.Content {
		n += blockOverhead + e.Text(b.Text) + e.Text(b.Output) + e.Text(b.Thinking) + e.bytesText(b.Input) + e.Text(b.Name)
		// Opaque data (signatures, redacted thinking) is sent back but
		// not counted by the providers as text: counted at the ratio.
		n += (len(b.Signature)+len(b.Data)+len(b.ID))/4 + 1
	}
	return n
}

// Messages estimates messages, calibrated.
func (e *Estimator) Messages(msgs []protocol.Message) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, m := range msgs {
		n += e.message(m)
	}
	return e.calibrated(n)
}

// Request estimates a whole request, calibrated.
func (e *Estimator) Request(req *protocol.Request) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calibrated(e.raw(req))
}

func (e *Estimator) raw(req *protocol.Request) int {
	n := requestOverhead + e.Text(req.System)
	for _, t := range req.Tools {
		n += toolOverhead + e.Text(t.Name) + e.Text(t.Description) + e.bytesText(t.InputSchema)
	}
	for _, m := range req.Messages {
		n += e.message(m)
	}
	return n
}

func (e *Estimator) calibrated(n int) int { return int(float64(n)*e.factor + 0.5) }

// calibrationMin is the smallest request whose reported size calibrates
// the estimate: in a small one the provider's fixed overheads dominate.
const calibrationMin = 1000

// Calibrate learns from a provider's count of a request's input tokens
// (input, cache read and cache write): an estimate found short is raised
// for the requests that follow; one found long is kept (the safe side).
func (e *Estimator) Calibrate(req *protocol.Request, reported int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	raw := e.raw(req)
	if raw < calibrationMin || reported <= 0 {
		return
	}
	if f := float64(reported) / float64(raw) * 1.02; f > e.factor {
		e.factor = min(f, 4)
	}
}

// Raise multiplies the calibration by f (a provider said a request the
// estimate let through was too long).
func (e *Estimator) Raise(f float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.factor = min(e.factor*f, 4)
}

// Factor is the calibration in force.
func (e *Estimator) Factor() float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.factor
}
