package protocol

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// The schemas are generated from jsonschema struct tags, which invopop
// splits on commas. A comma in a description must be written \\, in the raw
// tag; a plain comma cuts the description short and \, makes the whole tag
// unreadable (reflect drops it), and either fails silently.
func TestSchemaTagsParse(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	tagRe := regexp.MustCompile("`[^`]*jsonschema:[^`]*`")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range tagRe.FindAllString(string(src), -1) {
			tag := reflect.StructTag(strings.Trim(raw, "`"))
			v, ok := tag.Lookup("jsonschema")
			if !ok || v == "" {
				t.Errorf("%s: tag %s: jsonschema is unreadable (a \\, where \\\\, is meant?)", f, raw)
				continue
			}
			_, desc, found := strings.Cut(v, "description=")
			if found && strings.Contains(strings.ReplaceAll(desc, `\,`, ""), ",") {
				t.Errorf("%s: tag %s: description has an unescaped comma", f, raw)
			}
		}
	}
}
