package pgstore_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/powerglide/powerglide/pkg/store/pgstore"
)

// The init records the docs show carry the schema version pg-queue init
// prints now: a new migration updates them.
func TestDocsShowSchemaVersion(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"schema_version":(\d+)`)
	seen := 0
	for _, p := range append(docs, filepath.Join(root, "README.md")) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			seen++
			if v, _ := strconv.Atoi(string(m[1])); v != pgstore.SchemaVersion() {
				t.Errorf("%s shows \"schema_version\":%d, init prints %d", p, v, pgstore.SchemaVersion())
			}
		}
	}
	if seen == 0 {
		t.Fatal("no init record with a schema_version found in README.md or docs/")
	}
}
