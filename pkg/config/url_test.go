package config

import (
	"strings"
	"testing"
)

// TestStorePasswordHidden: a store URL's password is hidden in what the
// tools print and found for redaction, however it is written: with a
// '#', '/' or '?' a URL parser takes for the end of the host, or with
// libpq's backslash escapes in the keyword form.
func TestStorePasswordHidden(t *testing.T) {
	for _, c := range []struct{ in, redacted, password string }{
		{"postgres://u:s3cret@db/pg", "postgres://u:xxxxx@db/pg", "s3cret"},
		{"postgres://u@db/pg", "postgres://u@db/pg", ""},
		{"postgres://u:p@ss@db/pg", "postgres://u:xxxxx@db/pg", "p@ss"},
		{"postgres://alice:Hash#Secret1@127.0.0.1:55432/ateam", "postgres://alice:xxxxx@127.0.0.1:55432/ateam", "Hash#Secret1"},
		{"postgres://alice:Sl/ash@db/pg", "postgres://alice:xxxxx@db/pg", "Sl/ash"},
		{"postgres://alice:Qu?x@db/pg?sslmode=off", "postgres://alice:xxxxx@db/pg?sslmode=off", "Qu?x"},
		{"postgres://alice:12/ab@db/pg", "postgres://alice:xxxxx@db/pg", "12/ab"},
		{"postgres://db/pg?user=u&password=s3cret&x=1", "postgres://db/pg?user=u&password=xxxxx&x=1", "s3cret"},
		{"host=db password=s3cret dbname=pg", "host=db password=xxxxx dbname=pg", "s3cret"},
		{"host=db password='s3 cret' dbname=pg", "host=db password=xxxxx dbname=pg", "s3 cret"},
		{`host=db password=Esc\ apedSecret4 dbname=pg`, "host=db password=xxxxx dbname=pg", "Esc apedSecret4"},
		{`host=db password='it\'s' dbname=pg`, "host=db password=xxxxx dbname=pg", "it's"},
	} {
		if got := RedactURL(c.in); got != c.redacted {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.redacted)
		}
		if c.password != "" && strings.Contains(RedactURL(c.in), c.password) {
			t.Errorf("RedactURL(%q) shows the password", c.in)
		}
		if got := URLPassword(c.in); got != c.password {
			t.Errorf("URLPassword(%q) = %q, want %q", c.in, got, c.password)
		}
	}
}
