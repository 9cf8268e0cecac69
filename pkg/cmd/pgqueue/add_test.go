package pgqueue

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/powerglide/powerglide/pkg/cli"
)

// TestAddWithoutTitleOnTerminal: with no title and stdin a terminal there
// is nothing to read (a user would wait on a silent prompt): add says what
// it expects, exit 2, and creates nothing. (Not a terminal: add reads the
// tasks from stdin, add.txtar.)
func TestAddWithoutTitleOnTerminal(t *testing.T) {
	home := t.TempDir()
	var out, errb bytes.Buffer
	io := cli.Test(strings.NewReader(`{"title":"never read"}`+"\n"), &out, &errb, "HOME="+home, "POWERGLIDE_HOME="+home, "POWERGLIDE_TEAM=tty")
	io.InTTY = true
	code := cli.Run(context.Background(), Spec(), []string{"add"}, io)
	if code != 2 || !strings.Contains(errb.String(), `expected "<title>", or tasks as JSON Lines on stdin`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if _, err := os.Stat(filepath.Join(home, "teams", "tty")); !os.IsNotExist(err) {
		t.Fatalf("the team directory was created: %v", err)
	}
}
