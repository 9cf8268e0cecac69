package cli

import (
	"fmt"
	"strings"

	"github.com/alecthomas/kong"
)

// commandsPlaceholder marks where the COMMANDS section goes in mango's
// output. mango renders a command as its name with the long help glued to
// the same line and the summary after it, and folds example blocks into
// running text, so the commands are written here instead.
const commandsPlaceholder = "@@POWERGLIDE-COMMANDS@@"

// descriptionPlaceholder does the same for DESCRIPTION, whose examples
// would otherwise be filled into running text.
const descriptionPlaceholder = "@@POWERGLIDE-DESCRIPTION@@"

// descriptionRoff is the tool's description below its first line (which is
// the page's NAME), rendered as writeDetail renders a command's.
func descriptionRoff(app *kong.Application) string {
	text := app.Detail
	if text == "" {
		_, text, _ = strings.Cut(strings.TrimSpace(app.Help), "\n")
	}
	var b strings.Builder
	writeDetail(&b, text)
	return b.String()
}

// commandsRoff renders every visible command below root as a subsection:
// the full command line, its summary, its detail (paragraphs, with indented
// lines such as examples kept as they are) and its arguments and flags.
func commandsRoff(root *kong.Node) string {
	var b strings.Builder
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, c := range n.Children {
			if c.Hidden || c.Type != kong.CommandNode {
				continue
			}
			writeCommand(&b, c)
			walk(c)
		}
	}
	walk(root)
	return b.String()
}

func writeCommand(b *strings.Builder, n *kong.Node) {
	fmt.Fprintf(b, ".SS \"%s\"\n", roffQuoted(n.FullPath()+strings.TrimPrefix(n.Summary(), n.Path())))
	if n.Help != "" {
		b.WriteString(roffText(n.Help) + "\n")
	}
	if n.Detail != "" {
		writeDetail(b, n.Detail)
	}
	if len(n.Positional) > 0 {
		b.WriteString(".PP\n\\fBArguments:\\fR\n")
		for _, p := range n.Positional {
			fmt.Fprintf(b, ".TP\n\\fI%s\\fR\n%s\n", roffText(p.Summary()), roffText(p.Help))
		}
	}
	var flags []*kong.Flag
	for _, f := range n.Flags {
		if !f.Hidden {
			flags = append(flags, f)
		}
	}
	if len(flags) > 0 {
		b.WriteString(".PP\n\\fBFlags:\\fR\n")
		for _, f := range flags {
			name := "\\-\\-" + roffText(f.Name)
			if f.Short != 0 {
				name = fmt.Sprintf("\\-%c, %s", f.Short, name)
			}
			if !f.IsBool() && !f.IsCounter() {
				name += "=\\fI" + roffText(f.FormatPlaceHolder()) + "\\fR"
			}
			help := roffText(f.Help)
			if len(f.Envs) > 0 {
				help += " ($" + strings.Join(f.Envs, ", $") + ")"
			}
			fmt.Fprintf(b, ".TP\n\\fB%s\\fR\n%s\n", name, help)
		}
	}
}

// writeDetail writes help paragraphs (separated by blank lines). Runs of
// indented lines, the examples, are set without filling.
func writeDetail(b *strings.Builder, detail string) {
	for _, para := range strings.Split(strings.TrimSpace(detail), "\n\n") {
		b.WriteString(".PP\n")
		lines := strings.Split(para, "\n")
		for i := 0; i < len(lines); {
			if !indented(lines[i]) {
				var text []string
				for ; i < len(lines) && !indented(lines[i]); i++ {
					text = append(text, strings.TrimSpace(lines[i]))
				}
				b.WriteString(roffText(strings.Join(text, " ")) + "\n")
				continue
			}
			b.WriteString(".RS 4\n.nf\n")
			for ; i < len(lines) && indented(lines[i]); i++ {
				b.WriteString(roffText(strings.TrimSpace(lines[i])) + "\n")
			}
			b.WriteString(".fi\n.RE\n")
		}
	}
}

func indented(line string) bool {
	return strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")
}

// roffText escapes text for a roff text line: backslashes, a leading
// control character, and hyphens (so flags copy and paste as ASCII).
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

func roffQuoted(s string) string {
	return strings.ReplaceAll(roffText(s), `"`, `\(dq`)
}
