// Package shell writes words for a POSIX shell: a path or text that must
// reach sh -c, bash or a completion script as one word, exactly.
package shell

import "strings"

// Quote quotes s as one shell word: single quotes around it, and each
// single quote inside closed, escaped and reopened. It quotes even a word
// that needs none, so what a reader sees is always one word.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Words splits a command line into the words sh would run it with, when
// running it needs nothing else of the shell: words of plain characters,
// single-quoted text, double-quoted text without $, ` or \, and
// backslash-escaped characters (what Quote writes). ok is false for
// anything a shell would do more with: variables, globs, ~, redirections,
// pipes, lists, comments, assignments, reserved words, or an empty line.
// Such a line runs with sh -c, and so may any line: Words is for callers
// that would rather not start a shell for a plain one.
func Words(line string) (words []string, ok bool) {
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
			continue
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 || strings.ContainsAny(line[i+1:i+1+j], "$`\\") {
				return nil, false
			}
			w.WriteString(line[i+1 : i+1+j])
			i += j + 1
		case c == '\\':
			if i+1 >= len(line) || line[i+1] == '\n' {
				return nil, false
			}
			w.WriteByte(line[i+1])
			i++
		case plain(c) || c >= 0x80:
			if c == '=' && len(words) == 0 {
				return nil, false // an assignment, or a word that looks like one
			}
			w.WriteByte(c)
		default:
			return nil, false
		}
		inWord = true
	}
	if inWord {
		words = append(words, w.String())
	}
	if len(words) == 0 || reserved[strings.TrimSpace(strings.Fields(line)[0])] {
		return nil, false
	}
	return words, true
}

// plain reports whether c stands for itself anywhere in an unquoted word.
func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_./,:+@%=", c) >= 0
}

// reserved are the words that are syntax, not commands, as a line's first.
var reserved = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true, "done": true,
	"case": true, "esac": true, "while": true, "until": true, "for": true, "in": true, "function": true,
	"select": true, "time": true, "coproc": true,
}
