package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/alecthomas/kong"
	mangokong "github.com/alecthomas/mango-kong"
	"github.com/muesli/roff"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
)

// Common holds the flags and commands every tool has. Embed it:
//
//	type CLI struct {
//		cli.Common `embed:""`
//		...
//	}
type Common struct {
	Version    kong.VersionFlag `help:"Print the version and exit."`
	Schema     SchemaCmd        `cmd:"" help:"Print the JSON Schema of this tool's inputs and outputs."`
	Config     ConfigCmd        `cmd:"" help:"Show the resolved configuration and the layer each value came from."`
	Man        ManCmd           `cmd:"" hidden:"" help:"Print the man page (roff)."`
	Completion CompletionCmd    `cmd:"" hidden:"" help:"Print a shell completion script."`
}

// SchemaCmd prints the tool's schemas.
type SchemaCmd struct {
	Name string `arg:"" optional:"" help:"Schema to print; without it, the names are listed."`
}

// Run prints one schema, or lists the tool's schema names.
func (c *SchemaCmd) Run(rt *Runtime) error {
	if c.Name == "" {
		for _, n := range rt.Spec.Schemas {
			fmt.Fprintln(rt.IO.Out, n)
		}
		return nil
	}
	known := false
	for _, n := range rt.Spec.Schemas {
		known = known || n == c.Name
	}
	if !known {
		return Usagef("%s has no schema %q (known: %s)", rt.Spec.Name, c.Name, strings.Join(rt.Spec.Schemas, ", "))
	}
	b, err := protocol.Schema(c.Name)
	if err != nil {
		return Usagef("%v", err)
	}
	_, err = rt.IO.Out.Write(b)
	return err
}

// ConfigCmd prints the resolved configuration.
type ConfigCmd struct {
	JSON bool `help:"Print JSON Lines: one {key, value, source, origin} per key."`
}

// Run prints every key with its value and source.
func (c *ConfigCmd) Run(rt *Runtime) error {
	cfg, err := rt.Config()
	if err != nil {
		return err
	}
	if rt.IO.JSON(c.JSON || rt.JSON) {
		enc := jsonl.NewEncoder(rt.IO.Out)
		for _, v := range cfg.All() {
			rec := struct {
				Type   string `json:"type"`
				Key    string `json:"key"`
				Value  any    `json:"value"`
				Source string `json:"source"`
				Origin string `json:"origin,omitempty"`
			}{"config", v.Key, v.Value, string(v.Source), v.Origin}
			if v.Secret || isDuration(v.Value) || v.Key == "store" {
				rec.Value = v.Display()
				if _, object := v.Value.(json.RawMessage); object {
					rec.Value = json.RawMessage(v.Display())
				}
			}
			if err := enc.Encode(rec); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(rt.IO.Out, "# config file: %s\n", cfg.File)
	for _, v := range cfg.All() {
		src := string(v.Source)
		if v.Origin != "" {
			src += " (" + v.Origin + ")"
		}
		fmt.Fprintf(rt.IO.Out, "%-20s %-40s %s\n", v.Key, v.Display(), src)
	}
	return nil
}

func isDuration(v any) bool { _, ok := v.(interface{ Hours() float64 }); return ok }

// ManCmd prints the man page.
type ManCmd struct{}

// Run writes the roff man page built from the kong model.
func (c *ManCmd) Run(rt *Runtime) error {
	page := mangokong.NewManPage(1, rt.kong.Model)
	page.Root.Commands = nil
	page = page.WithLongDescription(descriptionPlaceholder)
	page = page.WithSection("Commands", commandsPlaceholder)
	page = page.WithSection("Exit Status", exitStatusText)
	if env := envVars(rt.kong.Model.Node); len(env) > 0 {
		page = page.WithSection("Environment", strings.Join(env, "\n"))
	}
	page = page.WithSection("Files", filesText)
	page = page.WithSection("See Also", seeAlso(rt.Spec.Name))
	out := fixedHeading(page.Build(roff.NewDocument()), rt.Spec.Name)
	out = strings.Replace(out, commandsPlaceholder+"\n", commandsRoff(rt.kong.Model.Node), 1)
	out = strings.Replace(out, descriptionPlaceholder+"\n", descriptionRoff(rt.kong.Model), 1)
	_, err := fmt.Fprint(rt.IO.Out, out)
	return err
}

// fixedHeading replaces mango's title line, which carries the day the page
// was generated (so committed pages went stale overnight) and puts the whole
// summary in the page header, with a stable one:
// .TH PG-X 1 "" "powerglide" "powerglide manual".
func fixedHeading(page, name string) string {
	head := fmt.Sprintf(".TH %s 1 \"\" \"powerglide\" \"powerglide manual\"", strings.ToUpper(name))
	if rest, ok := strings.CutPrefix(page, ".TH "); ok {
		if _, after, found := strings.Cut(rest, "\n"); found {
			return head + "\n" + after
		}
	}
	return head + "\n" + page
}

const exitStatusText = `0 success; 1 runtime failure (output that could not be written included); 2 usage error or bad input, nothing was changed; ` +
	`3 nothing to do; 4 a limit stopped the job; 124 timeout; 128+n killed by signal n (130 on Ctrl-C).`

const filesText = `$XDG_CONFIG_HOME/powerglide/config.json (default ~/.config/powerglide/config.json): the configuration file. ` +
	`$POWERGLIDE_HOME (default ~/.powerglide): the data root, with teams/, sessions/ and pty/.`

func seeAlso(self string) string {
	var out []string
	for _, t := range []string{"pg-dash", "pg-llm", "pg-loop", "pg-monitor", "pg-pty", "pg-queue", "pg-tool"} {
		if t != self {
			out = append(out, t+"(1)")
		}
	}
	return strings.Join(out, ", ")
}

func envVars(n *kong.Node) []string {
	seen := map[string]string{}
	var walk func(*kong.Node)
	walk = func(n *kong.Node) {
		for _, f := range n.Flags {
			for _, e := range f.Envs {
				seen[e] = "--" + f.Name + ": " + f.Help
			}
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(n)
	for _, name := range []string{"POWERGLIDE_HOME", "POWERGLIDE_CONFIG", "XDG_CONFIG_HOME"} {
		if _, ok := seen[name]; !ok {
			seen[name] = "see FILES"
		}
	}
	var out []string
	for k, v := range seen {
		out = append(out, k+"  "+v)
	}
	sort.Strings(out)
	return out
}
