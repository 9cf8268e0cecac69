package cli

import (
	"reflect"
	"sort"
)

// PruneCommands switches otherCommands, for the tests of the tools'
// grammars (tools_test.go).
func PruneCommands(on bool) { pruneCommands = on }

// CommandNames are the names and aliases of grammar's commands, at any
// depth, sorted.
func CommandNames(grammar any) []string {
	var names []string
	for n := range commandNames(reflect.TypeOf(grammar)) {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
