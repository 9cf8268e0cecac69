package loop

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// AskPattern is one --ask pattern: a glob over tool names, and optionally
// a wildcard over the call's arguments ("bash:git push*"). The argument
// part matches when any string value of the input's top level matches it
// whole (bash's command, write's path); in it * is any text, slashes and
// spaces included, and ? one character.
type AskPattern struct {
	Text string
	Tool string
	Arg  string
	has  bool // an argument part was given
}

// ParseAsk reads --ask patterns.
func ParseAsk(patterns []string) ([]AskPattern, error) {
	var out []AskPattern
	for _, p := range patterns {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("--ask: empty pattern")
		}
		a := AskPattern{Text: p, Tool: p}
		if tool, arg, ok := strings.Cut(p, ":"); ok {
			a.Tool, a.Arg, a.has = tool, arg, true
		}
		if a.Tool == "" {
			return nil, fmt.Errorf("--ask %q: no tool name before the colon (use * for every tool)", p)
		}
		if _, err := path.Match(a.Tool, ""); err != nil {
			return nil, fmt.Errorf("--ask %q: bad tool glob: %v", p, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Match reports whether a call matches the pattern.
func (a AskPattern) Match(c protocol.ToolCall) bool {
	if ok, _ := path.Match(a.Tool, c.Name); !ok {
		return false
	}
	if !a.has {
		return true
	}
	var in map[string]any
	if json.Unmarshal(c.Input, &in) != nil {
		return false
	}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if s, ok := in[k].(string); ok && wildcard(a.Arg, strings.TrimSpace(s)) {
			return true
		}
	}
	return false
}

// askMatch returns the first pattern a call matches.
func askMatch(ps []AskPattern, c protocol.ToolCall) (AskPattern, bool) {
	for _, p := range ps {
		if p.Match(c) {
			return p, true
		}
	}
	return AskPattern{}, false
}

// wildcard matches s whole against pattern: * is any run of characters,
// ? one character, everything else itself.
func wildcard(pattern, s string) bool {
	p, t := []rune(pattern), []rune(s)
	pi, ti := 0, 0
	star, mark := -1, 0
	for ti < len(t) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == t[ti]):
			pi++
			ti++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ti
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ti = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
