package secrets

import (
	"sort"
	"strings"
)

// A prefilter finds out in one pass over a text whether it may hold any of
// a set of patterns (secret values and key prefixes). Each pattern is
// anchored on its rarest byte (by a rough frequency of bytes in code and
// logs): the pass looks every byte up in a table, and only at an anchor
// byte compares the patterns anchored there. Text without a secret thus
// costs one table lookup per byte, whatever the number of patterns —
// instead of one substring scan per pattern.
type prefilter struct {
	at [256][]anchored
}

type anchored struct {
	text  string
	off   int    // where the anchor byte is in text
	value bool   // a secret value (else a shape prefix)
	mark  string // what replaces a value
}

// newPrefilter anchors the values (each with its mark) and the shape
// prefixes.
func newPrefilter(values, marks []string) *prefilter {
	p := &prefilter{}
	add := func(a anchored) {
		a.off = rarest(a.text)
		c := a.text[a.off]
		p.at[c] = append(p.at[c], a)
	}
	for i, v := range values {
		add(anchored{text: v, value: true, mark: marks[i]})
	}
	for _, sh := range shapes {
		for _, pre := range sh.prefixes {
			add(anchored{text: pre})
		}
	}
	return p
}

// shapeOnly is the prefilter of a redactor without values.
var shapeOnly = newPrefilter(nil, nil)

// scan reports whether s holds one of the values, and whether it holds a
// key shape (confirmed in place, not just its prefix).
func (p *prefilter) scan(s string) (value, shape bool) {
	for i := 0; i < len(s); i++ {
		cands := p.at[s[i]]
		if len(cands) == 0 {
			continue
		}
		for _, a := range cands {
			start := i - a.off
			if start < 0 || (a.value && value) || (!a.value && shape) || !strings.HasPrefix(s[start:], a.text) {
				continue
			}
			if a.value {
				value = true
			} else if _, _, ok := matchAt(s, start); ok {
				shape = true
			}
		}
		if value && shape {
			return
		}
	}
	return
}

// match is a secret found in a text: s[start:end] is replaced by mark.
// value tells a known value (named) from a key shape (a kind).
type match struct {
	start, end int
	mark       string
	value      bool
}

// replace returns s with every value and key shape replaced. Where
// matches overlap, the one starting first wins, the longer of two
// starting together, and a value's name over a shape's kind for the
// same text.
func (p *prefilter) replace(s string) string {
	var ms []match
	for i := 0; i < len(s); i++ {
		for _, a := range p.at[s[i]] {
			start := i - a.off
			if start < 0 || !strings.HasPrefix(s[start:], a.text) {
				continue
			}
			if a.value {
				ms = append(ms, match{start, start + len(a.text), a.mark, true})
				continue
			}
			if sh, end, ok := matchAt(s, start); ok && strings.HasPrefix(s[start:], a.text) {
				m := match{start, end, Mark(sh.name), false}
				if sh.keep {
					m.start += len(prefixAt(sh, s, start))
				}
				ms = append(ms, m)
			}
		}
	}
	if len(ms) == 0 {
		return s
	}
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].start != ms[j].start {
			return ms[i].start < ms[j].start
		}
		if ms[i].end != ms[j].end {
			return ms[i].end > ms[j].end
		}
		return ms[i].value && !ms[j].value
	})
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, m := range ms {
		if m.start < last {
			continue // inside a match already replaced
		}
		b.WriteString(s[last:m.start])
		b.WriteString(m.mark)
		last = m.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// rarest returns the position of the byte of t least likely in ordinary
// text (the first of equals).
func rarest(t string) int {
	best, cost := 0, 1<<30
	for i := 0; i < len(t); i++ {
		if c := byteCost(t[i]); c < cost {
			best, cost = i, c
		}
	}
	return best
}

// byteCost is a rough frequency rank of a byte in source code, logs and
// prose: spaces and common lower-case letters are everywhere, upper-case
// letters, digits and most punctuation much less so.
func byteCost(c byte) int {
	switch {
	case c == ' ' || c == '\t':
		return 100
	case strings.IndexByte("etaoinsrhl", c) >= 0:
		return 60
	case c == '\n' || c == '.' || c == ',' || c == '/' || c == '"' || c == '(' || c == ')' || c == '=' || c == ':':
		return 40
	case c >= 'a' && c <= 'z':
		return 30
	case c == '-' || c == '_':
		return 15
	case c >= '0' && c <= '9':
		return 10
	case c >= 'A' && c <= 'Z':
		return 8
	}
	return 5
}
