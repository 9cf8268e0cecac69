package loop

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/shell"
)

// A component line of plain words runs without a shell between pg-loop
// and the program (the program's parent is pg-loop); a line that needs
// the shell still gets one, with its arguments as "$@".
func TestComponentLines(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "list tools")
	body := "#!/bin/sh\nprintf '[{\"name\":\"%s\",\"description\":\"%s\",\"input_schema\":{\"type\":\"object\"}}]' \"$PPID\" \"${WHO:-nobody}:$*\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		line, desc string
		direct     bool
	}{
		{shell.Quote(script) + " a 'b c'", "nobody:a b c x", true},
		{"WHO=me " + shell.Quote(script) + " a", "me:a x", false},
		{shell.Quote(script) + " a; true", "", false},
	} {
		defs, err := ListCommand(ctx, c.line, dir, nil, os.Stderr, "x")
		if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		parent := defs[0].Name == strconv.Itoa(os.Getpid())
		if parent != c.direct {
			t.Errorf("%s: the program's parent is pg-loop: %v, want %v", c.line, parent, c.direct)
		}
		if c.desc != "" && defs[0].Description != c.desc {
			t.Errorf("%s: arguments %q, want %q", c.line, defs[0].Description, c.desc)
		}
	}
}

// With Inband, the tools coprocess lists its tools itself (a list
// request on its stdin), started by the request; no list command runs.
func TestServeToolsInbandList(t *testing.T) {
	tools := NewServeTools(fakeCmd(t, "tools"), "false", "", nil, os.Stderr)
	tools.Inband = true
	defer tools.Close()
	defs, err := tools.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) == 0 || defs[0].Name != "echo" {
		t.Fatalf("defs = %+v", defs)
	}
	// The same coprocess runs the calls.
	res, err := tools.Call(context.Background(), []protocol.ToolCall{{ID: "1", Name: "echo", Input: []byte(`{"x":1}`)}})
	if err != nil || len(res) != 1 || !res[0].OK {
		t.Fatalf("call after the list: %+v, %v", res, err)
	}
}
