package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/internal/testenv"
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

// BashComplete sources a bash completion script in a real bash and
// returns the candidates its function fn offers for line, as bash asks on
// Tab (a line ending in a space completes a new word), and bash's PATH
// after it, which the script must leave alone.
func BashComplete(t *testing.T, script, fn, line string) (cands, path string) {
	t.Helper()
	testenv.Need(t, "completion scripts are run in bash", "bash")
	file := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	words := strings.Fields(line)
	if strings.HasSuffix(line, " ") {
		words = append(words, "")
	}
	var quoted []string
	for _, w := range words {
		quoted = append(quoted, "'"+w+"'")
	}
	prog := fmt.Sprintf("source %s; COMP_WORDS=(%s); COMP_CWORD=%d; %s; echo \"${COMPREPLY[*]}\"; echo \"$PATH\"",
		file, strings.Join(quoted, " "), len(words)-1, fn)
	out, err := exec.Command("bash", "-c", prog).CombinedOutput()
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if err != nil || len(lines) != 2 {
		t.Fatalf("%q: bash: %v: %s", line, err, out)
	}
	return lines[0], lines[1]
}
