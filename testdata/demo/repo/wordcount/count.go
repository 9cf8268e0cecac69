// Package wordcount counts words.
package wordcount

import "strings"

// Count returns the number of words in s, separated by any white space.
func Count(s string) int {
	if s == "" {
		return 0
	}
	return len(strings.Split(s, " "))
}
