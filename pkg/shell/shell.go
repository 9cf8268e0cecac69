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
