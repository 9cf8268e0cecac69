package config

import (
	"net/url"
	"strings"

	"github.com/powerglide/powerglide/pkg/internal/lazyre"
)

// A store URL (key store) may hold a database password, in the URL
// (postgres://user:pw@host/db, ?password=pw) or in a libpq keyword string
// (password=pw). It is never shown: `config` prints the URL redacted, and
// the password is registered with the other secrets for redaction.

// keywordPassword finds password=… in a libpq keyword string, quoted or
// not; libpq takes a backslash as escaping the next character in both.
var keywordPassword = lazyre.Compile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|(?:[^\s\\]|\\.)*)`)

var queryPassword = lazyre.Compile(`(?i)([?&]password=)[^&#]*`)

// RedactURL returns a store URL with its password replaced by xxxxx.
func RedactURL(rawURL string) string {
	s := rawURL
	i := strings.Index(s, "://")
	if i < 0 {
		return keywordPassword().ReplaceAllString(s, "${1}xxxxx")
	}
	// user:password@ before the host, found by hand: the rest may not
	// parse. A password may hold an unescaped '/', '?' or '#' (which end
	// the host for a URL parser), so the user part runs to the last '@'
	// of the whole string: one after the host (a query value) hides more
	// than the password, never less.
	rest := s[i+3:]
	if c, at := userinfo(rest); at >= 0 {
		s = s[:i+3] + rest[:c+1] + "xxxxx" + rest[at:]
	}
	return queryPassword().ReplaceAllString(s, "${1}xxxxx")
}

// userinfo finds user:password@ at the start of rest (a URL after its
// "://"): the first ':' and the last '@' after it, or -1, -1.
func userinfo(rest string) (colon, at int) {
	at = strings.LastIndex(rest, "@")
	if at < 0 {
		return -1, -1
	}
	colon = strings.Index(rest[:at], ":")
	if colon < 0 {
		return -1, -1
	}
	return colon, at
}

// URLPassword returns a store URL's password, or "".
func URLPassword(rawURL string) string {
	if i := strings.Index(rawURL, "://"); i >= 0 {
		u, err := url.Parse(rawURL)
		if err == nil {
			if p, ok := u.User.Password(); ok {
				return p
			}
			if p := u.Query().Get("password"); p != "" {
				return p
			}
		}
		// A URL that does not parse (a password with an unescaped '#',
		// '/' or '?') still has its password registered for redaction:
		// what RedactURL hides, as it is written.
		rest := rawURL[i+3:]
		if c, at := userinfo(rest); at >= 0 {
			return rest[c+1 : at]
		}
		return ""
	}
	m := keywordPassword().FindStringSubmatch(rawURL)
	if m == nil {
		return ""
	}
	p := m[2]
	if len(p) >= 2 && strings.HasPrefix(p, "'") && strings.HasSuffix(p, "'") {
		p = p[1 : len(p)-1]
	}
	return unescapeKeyword(p)
}

// unescapeKeyword undoes libpq's backslash escapes in a keyword value.
func unescapeKeyword(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
