package cli

import (
	"reflect"
	"regexp"
	"strings"
	"unicode"

	"github.com/alecthomas/kong"
)

// defaultSuffices reports whether spec.Default's grammar parses args as
// the whole one would: no argument is the name of a command it lacks, and
// none asks for a description of the tool (which lists every command).
func defaultSuffices(spec *Spec, args []string) bool {
	if describes(args) {
		return false
	}
	has := commandNames(reflect.TypeOf(spec.Default()))
	others := commandNames(reflect.TypeOf(spec.CLI))
	for _, a := range args {
		if others[a] && !has[a] {
			return false
		}
	}
	return true
}

// describes reports whether args may ask for help, the man page or a
// completion script: the runs that read the grammar's help texts. It
// errs on the side of yes (an argument "man" may be a task's text, an
// "h" in a cluster of short flags such as -rh the value of another).
func describes(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "--help") || a == "man" || a == "completion" || shortHelp(a) {
			return true
		}
	}
	return false
}

// shortHelp reports whether a is -h, alone or in a cluster (-rh).
func shortHelp(a string) bool {
	return len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.IndexByte(a, 'h') > 0
}

// dropHelp empties the help texts of a grammar that will not be described
// (a kong.PostBuild option): kong interpolates ${vars} into every one with
// a regular expression before parsing, a third of a start of pg-loop
// (issue 21), and nothing but help, the man page and completions reads
// them.
func dropHelp(k *kong.Kong) error {
	return kong.Visit(k.Model.Node, func(v kong.Visitable, next kong.Next) error {
		switch v := v.(type) {
		case *kong.Node:
			v.Help = ""
		case *kong.Value:
			v.Help = ""
		}
		return next(nil)
	})
}

// dropShadowedFlags removes from the commands of Common the flags the
// tool has itself (pg-queue's --json): kong accepts the tool's flag after
// the command too, so the command's own would only be listed twice in its
// --help. The command reads the tool's (Runtime.JSON). A kong.PostBuild
// option.
func dropShadowedFlags(k *kong.Kong) error {
	root := map[string]bool{}
	for _, f := range k.Model.Node.Flags {
		root[f.Name] = true
	}
	for _, c := range k.Model.Node.Children {
		if c.Name != "config" {
			continue
		}
		kept := c.Flags[:0]
		for _, f := range c.Flags {
			if !root[f.Name] {
				kept = append(kept, f)
			}
		}
		c.Flags = kept
	}
	return nil
}

// pruneCommands is off in the tests that compare a pruned grammar with
// the whole.
var pruneCommands = true

// otherCommands returns a kong.IgnoreFields pattern for the top-level
// commands of grammar that args do not run, when args start with the name
// of one (pg-tool serve, pg-queue claim): kong then builds that command's
// node alone, not every command's by reflection at every start. "" when
// args start otherwise (a flag, whose value might look like a command).
func otherCommands(grammar any, args []string) string {
	if !pruneCommands || len(args) == 0 {
		return ""
	}
	t := reflect.TypeOf(grammar)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var others []string
	chosen, positional := false, false
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			_, embed := f.Tag.Lookup("embed")
			_, cmd := f.Tag.Lookup("cmd")
			_, arg := f.Tag.Lookup("arg")
			positional = positional || arg
			switch {
			case cmd && commandNamed(f, args[0]):
				chosen = true
			case cmd:
				others = append(others, regexp.QuoteMeta(f.Name))
			case (embed || f.Anonymous) && f.Type.Kind() == reflect.Struct:
				walk(f.Type)
			}
		}
	}
	walk(t)
	if !chosen || positional || len(others) == 0 {
		return ""
	}
	return "^" + regexp.QuoteMeta(t.Name()) + `\.(` + strings.Join(others, "|") + ")$"
}

// commandNamed reports whether the command field f is named name, or
// has it as an alias.
func commandNamed(f reflect.StructField, name string) bool {
	n := f.Tag.Get("name")
	if n == "" {
		n = kebab(f.Name)
	}
	if n == name {
		return true
	}
	for _, a := range strings.Split(f.Tag.Get("aliases"), ",") {
		if strings.TrimSpace(a) == name {
			return true
		}
	}
	return false
}

// commandNames are the names and aliases of the commands of a kong
// grammar, at any depth.
func commandNames(t reflect.Type) map[string]bool {
	names := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag
			_, cmd := tag.Lookup("cmd")
			if cmd {
				name := tag.Get("name")
				if name == "" {
					name = kebab(f.Name)
				}
				names[name] = true
				for _, a := range strings.Split(tag.Get("aliases"), ",") {
					if a = strings.TrimSpace(a); a != "" {
						names[a] = true
					}
				}
			}
			if _, embed := tag.Lookup("embed"); cmd || embed || f.Anonymous {
				walk(f.Type)
			}
		}
	}
	walk(t)
	return names
}

// kebab is kong's name for a field: SessionsList -> sessions-list.
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
