package guard

import (
	"strings"
)

// The element that marks untrusted output in the conversation the model
// sees:
//
//	<untrusted source="mcp__web__fetch">
//	...the tool's output...
//	</untrusted>
//
// A closing tag inside the output is defused, so the content cannot end
// the element early and pass for trusted text.
const (
	openTag  = `<untrusted source="`
	closeTag = "</untrusted>"
)

// Wrap marks output of source as untrusted.
func Wrap(source, output string) string {
	body := strings.ReplaceAll(output, closeTag, "</untrusted\u200b>")
	return openTag + strings.ReplaceAll(source, `"`, "") + "\">\n" + body + "\n" + closeTag
}

// Unwrap returns the source and the body of wrapped output.
func Unwrap(s string) (source, body string, ok bool) {
	rest, ok := strings.CutPrefix(s, openTag)
	if !ok {
		return "", "", false
	}
	source, rest, ok = strings.Cut(rest, "\">\n")
	if !ok {
		return "", "", false
	}
	body, _, ok = strings.Cut(rest, "\n"+closeTag)
	return source, body, ok
}
