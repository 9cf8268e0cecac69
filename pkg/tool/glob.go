package tool

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// Globs are matched by doublestar: *, ?, ** as a whole path segment,
// {a,b} alternatives and [..] classes, with / as the separator. Its
// classes lack what POSIX and git's wildmatch have: a ] first in the class
// ("[]a]") and named classes ("[[:digit:]]"); toDoublestar rewrites every
// class into doublestar's form, each member escaped, so both mean what a
// shell or git would make of them.

// glob is a compiled glob.
type glob struct{ pattern string }

func (g *glob) match(p string) bool {
	ok, _ := doublestar.Match(g.pattern, p) // validated when compiled
	return ok
}

// compileGlob compiles a glob a model gave in field. With anyDir the
// pattern may match at any depth. A malformed one (an unclosed "[" or "{",
// a final backslash, an unknown [:class:]) is an error naming the field,
// not a pattern that silently matches nothing.
func compileGlob(field, g string, anyDir bool) (*glob, error) {
	pat, err := toDoublestar(g, true)
	if err != nil {
		return nil, badInput(fmt.Errorf("field %s: bad glob %q: %v", field, g, err))
	}
	if anyDir {
		pat = "**/" + pat
	}
	return &glob{pat}, nil
}

// toDoublestar rewrites a glob into doublestar's syntax and checks it.
// Without braces, { and } are literal (git's patterns have no
// alternatives).
func toDoublestar(g string, braces bool) (string, error) {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(g); i++ {
		switch c := g[i]; c {
		case '\\':
			if i+1 == len(g) {
				return "", errors.New("it ends in a backslash")
			}
			_, n := utf8.DecodeRuneInString(g[i+1:])
			b.WriteString(g[i : i+1+n])
			i += n
		case '[':
			class, n, err := bracketClass(g[i:])
			if err != nil {
				return "", err
			}
			b.WriteString(class)
			i += n - 1
		case '{', '}', ',':
			switch {
			case !braces:
				b.WriteByte('\\')
			case c == '{':
				depth++
			case c == '}' && depth == 0:
				return "", errors.New("} without a {")
			case c == '}':
				depth--
			}
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	if depth > 0 {
		return "", errors.New("unclosed { (write \\{ for a literal brace)")
	}
	pat := b.String()
	if !doublestar.ValidatePattern(pat) {
		return "", errors.New("not a valid pattern")
	}
	return pat, nil
}

// posixClasses are the named classes of POSIX brackets, as ranges.
var posixClasses = map[string][][2]rune{
	"alnum":  {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}},
	"alpha":  {{'A', 'Z'}, {'a', 'z'}},
	"blank":  {{' ', ' '}, {'\t', '\t'}},
	"cntrl":  {{0, 0x1f}, {0x7f, 0x7f}},
	"digit":  {{'0', '9'}},
	"graph":  {{0x21, 0x7e}},
	"lower":  {{'a', 'z'}},
	"print":  {{0x20, 0x7e}},
	"punct":  {{'!', '/'}, {':', '@'}, {'[', '`'}, {'{', '~'}},
	"space":  {{'\t', '\r'}, {' ', ' '}},
	"upper":  {{'A', 'Z'}},
	"xdigit": {{'0', '9'}, {'A', 'F'}, {'a', 'f'}},
}

// bracketClass reads the class at the start of g ("[...]", POSIX rules: a
// ] right after [ or [! is a member, [:name:] a named class, \x the
// character x) and returns it in doublestar's form and the bytes it took.
func bracketClass(g string) (string, int, error) {
	i := 1
	var b strings.Builder
	b.WriteByte('[')
	if i < len(g) && (g[i] == '!' || g[i] == '^') {
		b.WriteByte('!')
		i++
	}
	first := i
	last := rune(-1) // the member before, which a - makes a range start
	escaped := func(r rune) {
		b.WriteByte('\\')
		b.WriteRune(r)
	}
	for i < len(g) {
		c := g[i]
		switch {
		case c == ']' && i > first:
			b.WriteByte(']')
			return b.String(), i + 1, nil
		case c == '[' && strings.HasPrefix(g[i:], "[:"):
			end := strings.Index(g[i+2:], ":]")
			if end < 0 {
				escaped('[')
				i, last = i+1, '['
				continue
			}
			name := g[i+2 : i+2+end]
			ranges, ok := posixClasses[name]
			if !ok {
				return "", 0, fmt.Errorf("unknown character class [:%s:]", name)
			}
			for _, r := range ranges {
				escaped(r[0])
				if r[1] != r[0] {
					b.WriteByte('-')
					escaped(r[1])
				}
			}
			i += 2 + end + 2
		case c == '-' && last >= 0 && i+1 < len(g) && g[i+1] != ']':
			// A range from the member before to the one after.
			hi, n, err := classMember(g[i+1:])
			if err != nil {
				return "", 0, err
			}
			if hi < last {
				return "", 0, fmt.Errorf("invalid character class range %c-%c", last, hi)
			}
			b.WriteByte('-')
			escaped(hi)
			i += 1 + n
			last = -1
		default:
			r, n, err := classMember(g[i:])
			if err != nil {
				return "", 0, err
			}
			escaped(r)
			i += n
			last = r
			continue
		}
		last = -1
	}
	return "", 0, errors.New("unclosed [ (write \\[ for a literal bracket)")
}

// classMember reads one character of a class: c, or \c.
func classMember(g string) (rune, int, error) {
	if g[0] != '\\' {
		r, n := utf8.DecodeRuneInString(g)
		return r, n, nil
	}
	if len(g) == 1 {
		return 0, 0, errors.New("it ends in a backslash")
	}
	r, n := utf8.DecodeRuneInString(g[1:])
	return r, 1 + n, nil
}
