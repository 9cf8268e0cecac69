package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"
	"github.com/powerglide/powerglide/pkg/config"
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

// showDefaults adds to the help of every flag its default, where the help
// does not already give it: the one in its tag, else its configuration
// key's (a kong.PostBuild option, for the runs that describe the tool).
// Only the text changes: a flag's value still comes from the command line,
// then the environment, the config file and the default, in that order.
func showDefaults(k *kong.Kong) error {
	return kong.Visit(k.Model.Node, func(v kong.Visitable, next kong.Next) error {
		if f, ok := v.(*kong.Flag); ok && !f.IsBool() && !strings.Contains(strings.ToLower(f.Help), "default") {
			if d := flagDefault(f); d != "" && !shownAsPlaceholder(f, d) {
				f.Help = strings.TrimSuffix(f.Help, ".") + " (default " + d + ")."
			}
		}
		return next(nil)
	})
}

// shownAsPlaceholder reports whether kong already shows the default d as
// the flag's placeholder (--reserve=2048), as it does for a flag with none.
func shownAsPlaceholder(f *kong.Flag, d string) bool {
	ph := f.FormatPlaceHolder()
	return ph == d || ph == strconv.Quote(d)
}

// flagDefault is a flag's default as a user would type it, or "" when it
// has none worth showing: none, or zero (off, none, or a value the help
// explains).
func flagDefault(f *kong.Flag) string {
	if f.HasDefault {
		switch f.Default {
		case "", "0", "0s", "0.0":
			return ""
		}
		return f.Default
	}
	key, ok := config.Lookup(f.Tag.Get("config"))
	if !ok || key.Default == nil || key.Secret {
		return ""
	}
	switch d := key.Default.(type) {
	case time.Duration:
		return shortDuration(d)
	case string:
		if d != "" {
			return strconv.Quote(d) // the team is named "default"
		}
	case int:
		if d != 0 {
			return strconv.Itoa(d)
		}
	case float64:
		if d != 0 {
			return strconv.FormatFloat(d, 'g', -1, 64)
		}
	}
	return ""
}

// shortDuration writes 10m for 10m0s and 1h for 1h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
