package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/alecthomas/kong"
)

// helpPrinter is kong's help, plus, on the tool's own --help, the flags
// of its default command: `pg-dash --team T --once` and `pg-loop --task X`
// run that command, so the flags a user types first must show where they
// look first, not only under `pg-dash show --help`.
func helpPrinter(options kong.HelpOptions, ctx *kong.Context) error {
	if err := kong.DefaultHelpPrinter(options, ctx); err != nil {
		return err
	}
	def := ctx.Model.Node.DefaultCmd
	if ctx.Selected() != nil || def == nil || def.Tag.Default != "withargs" {
		return nil
	}
	fmt.Fprintf(ctx.Stdout, "\nFlags of %s, the default command (%s %s --help):\n", def.Name, ctx.Model.Name, def.Name)
	tw := tabwriter.NewWriter(ctx.Stdout, 0, 4, 2, ' ', 0)
	for _, f := range def.Flags { // its own: the inherited ones are listed above
		if !f.Hidden {
			fmt.Fprintf(tw, "  %s\t%s\n", flagSynopsis(f), strings.Join(strings.Fields(kong.DefaultHelpValueFormatter(f.Value)), " "))
		}
	}
	return tw.Flush()
}

// flagSynopsis is a flag as kong's help writes it: -s, --name=PLACEHOLDER.
func flagSynopsis(f *kong.Flag) string {
	s := "    "
	if f.Short != 0 {
		s = fmt.Sprintf("-%c, ", f.Short)
	}
	s += "--" + f.Name
	if !f.IsBool() && !f.IsCounter() {
		s += "=" + f.FormatPlaceHolder()
	}
	return s
}
