package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestKeysAreDeclared: the registry is one declared list, assembled in
// keys.go from the files that hold a tool's keys; no file grows it from an
// init function, where the order of files decides what a reader of the
// registry sees and a test can append keys production never has.
func TestKeysAreDeclared(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "init" {
				t.Errorf("%s: an init function in package config", fset.Position(fd.Pos()))
			}
		}
	}
	names, envs := map[string]bool{}, map[string]string{}
	for _, k := range keys {
		if names[k.Name] {
			t.Errorf("key %s registered twice", k.Name)
		}
		names[k.Name] = true
		for _, v := range k.Env {
			if other, ok := envs[v]; ok {
				t.Errorf("%s is the variable of %s and %s", v, other, k.Name)
			}
			envs[v] = k.Name
		}
	}
	for _, name := range []string{"home", "monitor_heartbeat", "loop_breaker_repeat"} {
		if _, ok := Lookup(name); !ok {
			t.Errorf("key %s is not registered", name)
		}
	}
}
