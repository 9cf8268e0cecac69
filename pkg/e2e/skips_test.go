package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// skipLine is a script line whose command is skip, with its conditions.
var skipLine = regexp.MustCompile(`^((?:\[[^\]]*\]\s*)*)skip(?:\s|$)`)

// TestSkipsFailUnderCI: a script may skip only behind a condition that
// cannot hide a failure under CI=true: [!have:PROG] (an error under
// CI=true when PROG is missing), [!linux] (the platform), or [!mcp] (the
// npm MCP servers, missing only with POWERGLIDE_TEST_NO_NPM=1; TestPgTool
// fails otherwise). A bare skip, or one behind [!exec:PROG], would pass CI
// without running.
func TestSkipsFailUnderCI(t *testing.T) {
	allowed := regexp.MustCompile(`^\[!(have:[A-Za-z0-9._+-]+|linux|mcp)\]$`)
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "script", "*", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --") {
				break // the files of the archive follow
			}
			m := skipLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			conds := regexp.MustCompile(`\[[^\]]*\]`).FindAllString(m[1], -1)
			if len(conds) != 1 || !allowed.MatchString(conds[0]) {
				t.Errorf("%s:%d: %q may skip under CI=true; use [!have:PROG] skip", file, n, line)
			}
		}
		f.Close()
	}
}

// TestHaveCondition: [have:PROG] is false for a missing program outside CI
// and an error under CI=true.
func TestHaveCondition(t *testing.T) {
	t.Setenv("CI", "")
	if ok, err := condition("have:sh"); !ok || err != nil {
		t.Errorf("have:sh: %v %v", ok, err)
	}
	if ok, err := condition("have:pg-no-such-program"); ok || err != nil {
		t.Errorf("outside CI, a missing program: %v %v", ok, err)
	}
	t.Setenv("CI", "true")
	if _, err := condition("have:pg-no-such-program"); err == nil || !strings.Contains(err.Error(), "pg-no-such-program is not installed") {
		t.Errorf("under CI=true, a missing program: %v", err)
	}
	if _, err := condition("nonsense"); err == nil {
		t.Error("an unknown condition is accepted")
	}
}
