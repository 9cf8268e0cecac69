package secrets

import "strings"

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
	off   int  // where the anchor byte is in text
	value bool // a secret value (else a shape prefix)
}

func newPrefilter(values []string) *prefilter {
	p := &prefilter{}
	add := func(t string, value bool) {
		off := rarest(t)
		p.at[t[off]] = append(p.at[t[off]], anchored{t, off, value})
	}
	for _, v := range values {
		add(v, true)
	}
	for _, sh := range shapes {
		for _, pre := range sh.prefixes {
			add(pre, false)
		}
	}
	return p
}

// shapeOnly is the prefilter of a redactor without values.
var shapeOnly = newPrefilter(nil)

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
