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

// keywordPassword finds password=… in a libpq keyword string, quoted or not.
var keywordPassword = lazyre.Compile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]*)`)

var queryPassword = lazyre.Compile(`(?i)([?&]password=)[^&#]*`)

// RedactURL returns a store URL with its password replaced by xxxxx.
func RedactURL(rawURL string) string {
	s := rawURL
	i := strings.Index(s, "://")
	if i < 0 {
		return keywordPassword().ReplaceAllString(s, "${1}xxxxx")
	}
	// user:password@ before the host, found by hand: the rest may not parse.
	rest := s[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		if c := strings.Index(rest[:at], ":"); c >= 0 {
			s = s[:i+3] + rest[:c+1] + "xxxxx" + rest[at:]
		}
	}
	return queryPassword().ReplaceAllString(s, "${1}xxxxx")
}

// URLPassword returns a store URL's password, or "".
func URLPassword(rawURL string) string {
	if strings.Contains(rawURL, "://") {
		u, err := url.Parse(rawURL)
		if err != nil {
			return ""
		}
		if p, ok := u.User.Password(); ok {
			return p
		}
		return u.Query().Get("password")
	}
	m := keywordPassword().FindStringSubmatch(rawURL)
	if m == nil {
		return ""
	}
	p := m[2]
	if len(p) >= 2 && strings.HasPrefix(p, "'") && strings.HasSuffix(p, "'") {
		p = strings.ReplaceAll(p[1:len(p)-1], `\'`, `'`)
	}
	return p
}
