package secrets

import (
	"strings"
	"unsafe"
)

// A shape is a well-known kind of key: a fixed prefix followed by a run of
// key characters. Matching is by hand, not by regexp: a prefix scan
// (strings.Index, SIMD) finds the candidates and the run is checked in
// place, so text without a candidate costs one scan per prefix.
type shape struct {
	name     string
	prefixes []string
	body     func(c byte) bool
	min, max int  // length of the run after the prefix (max 0: unbounded)
	keep     bool // keep the prefix visible ("Bearer [redacted:...]")
}

var shapes = []shape{
	// Anthropic before OpenAI: both start with sk-.
	{name: "anthropic-key", prefixes: []string{"sk-ant-"}, body: keyChar, min: 20},
	{name: "openai-key", prefixes: []string{"sk-"}, body: keyChar, min: 20},
	{name: "github-token", prefixes: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, body: alnum, min: 30},
	{name: "github-token", prefixes: []string{"github_pat_"}, body: wordChar, min: 30},
	{name: "aws-access-key", prefixes: []string{"AKIA", "ASIA"}, body: upperAlnum, min: 16, max: 16},
	{name: "bearer-token", prefixes: []string{"Bearer ", "bearer ", "BEARER "}, body: tokenChar, min: 16, keep: true},
}

// anchors are what the prefilter scans for: fewer scans than prefixes
// (one "gh" for five GitHub prefixes, "earer " for any case of Bearer),
// each with how far before it the shape's prefix starts.
var anchors = []struct {
	text string
	back int
}{{"sk-", 0}, {"gh", 0}, {"github_pat_", 0}, {"AKIA", 0}, {"ASIA", 0}, {"earer ", 1}, {"EARER ", 1}}

// firstByte marks the bytes a shape prefix starts with.
var firstByte = func() (t [256]bool) {
	for _, s := range shapes {
		for _, p := range s.prefixes {
			t[p[0]] = true
		}
	}
	return t
}()

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
func upperAlnum(c byte) bool { return c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
func wordChar(c byte) bool   { return alnum(c) || c == '_' }
func keyChar(c byte) bool    { return wordChar(c) || c == '-' }
func tokenChar(c byte) bool {
	return keyChar(c) || c == '.' || c == '~' || c == '+' || c == '/' || c == '='
}

// hasShape reports whether s holds a key-shaped string.
func hasShape(s string) bool {
	for _, a := range anchors {
		for off := 0; ; {
			i := strings.Index(s[off:], a.text)
			if i < 0 {
				break
			}
			if at := off + i - a.back; at >= 0 {
				if _, _, ok := matchAt(s, at); ok {
					return true
				}
			}
			off += i + 1
		}
	}
	return false
}

func prefixAt(sh *shape, s string, i int) string {
	for _, p := range sh.prefixes {
		if strings.HasPrefix(s[i:], p) {
			return p
		}
	}
	return ""
}

// matchAt reports whether a key shape starts at s[i], and where it ends.
// A shape must start a word: "task-queue-..." holds "sk-" but no key.
func matchAt(s string, i int) (*shape, int, bool) {
	if i > 0 && keyChar(s[i-1]) {
		return nil, 0, false
	}
	for k := range shapes {
		sh := &shapes[k]
		p := prefixAt(sh, s, i)
		if p == "" {
			continue
		}
		j := i + len(p)
		for j < len(s) && sh.body(s[j]) && (sh.max == 0 || j-i-len(p) < sh.max) {
			j++
		}
		n := j - i - len(p)
		if n < sh.min {
			continue
		}
		if sh.max > 0 && j < len(s) && keyChar(s[j]) {
			continue // longer than the shape allows: something else
		}
		return sh, j, true
	}
	return nil, 0, false
}

func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Shapes returns the key-shaped strings of s, in order.
func Shapes(s string) []string {
	if !hasShape(s) {
		return nil
	}
	var out []string
	for i := 0; i < len(s); i++ {
		if !firstByte[s[i]] {
			continue
		}
		if sh, end, ok := matchAt(s, i); ok {
			start := i
			if sh.keep {
				start += len(prefixAt(sh, s, i))
			}
			out = append(out, s[start:end])
			i = end - 1
		}
	}
	return out
}
