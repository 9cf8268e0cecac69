// Package dial opens the team store a URL names (--store, POWERGLIDE_STORE,
// config key store):
//
//   - "" or "file:": the team directories under the data root;
//   - "file:/path" (or "file:///path"): those under /path, as if
//     POWERGLIDE_HOME were /path;
//   - "postgres://…" or "postgresql://…" (a libpq URL), or a libpq keyword
//     string such as "host=db dbname=powerglide": PostgreSQL, with the PG*
//     environment variables filling what the URL leaves out.
//
// Anything else is bad input. No error or record ever shows the URL's
// password: see Redact.
package dial

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/powerglide/powerglide/pkg/config"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/filestore"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// Options are what a store needs besides its URL.
type Options struct {
	// Home is the data root, where "" and "file:" keep the teams.
	Home string
	// File tunes the file store's queues.
	File filestore.Options
	// OneShot says the process makes a few store calls and exits (a
	// pg-queue command): PostgreSQL statements are then sent without
	// preparing them first, and a claim, renew or complete is one round
	// trip with its schema check and its notification (pgstore.Options).
	OneShot bool
	// Began, when set, is when the command began to reach the store: a
	// PostgreSQL store's connect timeout counts from then (pg-queue's
	// direct connection after its store agent failed).
	Began time.Time
	// Remote, when set, opens PostgreSQL stores instead of the driver
	// (a store agent's client: pg-loop, which does not link pgx).
	Remote func(ctx context.Context, url string) (store.Store, error)
}

// Open opens the store url names, with home as the data root of the file
// store.
func Open(url, home string) (store.Store, error) {
	return OpenContext(context.Background(), url, Options{Home: home})
}

// OpenContext opens the store url names; ctx bounds connecting to it.
func OpenContext(ctx context.Context, rawURL string, o Options) (store.Store, error) {
	kind, home, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "file":
		if home == "" {
			home = o.Home
		}
		return filestore.Open(home, o.File), nil
	default:
		s, err := openPostgres(ctx, rawURL, o)
		if err != nil {
			return nil, redactErr(rawURL, err)
		}
		return s, nil
	}
}

// FromConfig opens the store of a tool's resolved configuration: keys
// store and home, and queue_sync and queue_keep_finished for the file
// store's queues.
func FromConfig(ctx context.Context, cfg *config.Config, o Options) (store.Store, error) {
	o.File.NoSync = !cfg.Bool("queue_sync")
	o.File.KeepFinished = cfg.Int("queue_keep_finished")
	o.Home = cfg.String("home")
	return OpenContext(ctx, cfg.String("store"), o)
}

// Team opens the store of a tool's configuration (FromConfig) and one team
// in it. An invalid team name is bad input (exit 2), as is a store URL that
// names no store. The caller closes the store; the team is used through it.
func Team(ctx context.Context, cfg *config.Config, o Options, name string) (store.Store, store.Team, error) {
	st, err := FromConfig(ctx, cfg, o)
	if err != nil {
		return nil, nil, err
	}
	tm, err := st.Team(name)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, tm, nil
}

// InputError is a store URL that names no store: bad input (exit 2).
type InputError struct{ Msg string }

func (e *InputError) Error() string  { return e.Msg }
func (e *InputError) BadInput() bool { return true }

// Parse tells which store a URL names: "file" with the data root it gives
// ("" for the default one), or "postgres".
func Parse(rawURL string) (kind, home string, err error) {
	s := strings.TrimSpace(rawURL)
	switch {
	case s == "" || s == "file:":
		return "file", "", nil
	case strings.HasPrefix(s, "file:"):
		p := strings.TrimPrefix(s, "file:")
		if strings.HasPrefix(p, "//") {
			p = strings.TrimPrefix(p, "//")
			if !strings.HasPrefix(p, "/") {
				return "", "", &InputError{fmt.Sprintf("invalid store %q: a file: URL names no host; use file:/path or file:///path", Redact(rawURL))}
			}
		}
		if !filepath.IsAbs(p) {
			return "", "", &InputError{fmt.Sprintf("invalid store %q: use file: (the data root) or file:/absolute/path", Redact(rawURL))}
		}
		return "file", filepath.Clean(p), nil
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		if _, err := url.Parse(s); err != nil {
			if config.URLPassword(rawURL) != "" {
				// The parser's words quote a piece of the URL, which here
				// is a piece of the password ("invalid port \":Hash\"").
				return "", "", &InputError{fmt.Sprintf("invalid store %q: the URL does not parse; a '#', '/', '?' or '@' in the password must be percent-encoded (%%23, %%2F, %%3F, %%40), or give it in PGPASSWORD or ~/.pgpass", Redact(rawURL))}
			}
			return "", "", &InputError{fmt.Sprintf("invalid store %q: %v", Redact(rawURL), redactErr(rawURL, unwrapURLError(err)))}
		}
		return "postgres", "", nil
	case strings.Contains(s, "="):
		return "postgres", "", nil
	}
	return "", "", &InputError{fmt.Sprintf("invalid store %q: use file:, file:/path, postgres://… or a libpq keyword string (host=… dbname=…)", Redact(rawURL))}
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Redact returns the URL with its password replaced by xxxxx: the form
// every message and record shows.
func Redact(rawURL string) string { return config.RedactURL(rawURL) }

// redactErr hides the URL's password wherever err's text shows it.
func redactErr(rawURL string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	p := config.URLPassword(rawURL)
	out := msg
	if p != "" {
		out = strings.ReplaceAll(out, p, "xxxxx")
	}
	if strings.Contains(out, rawURL) {
		out = strings.ReplaceAll(out, rawURL, Redact(rawURL))
	}
	if out == msg {
		return err
	}
	return &redacted{msg: out, err: err}
}

// redacted is an error whose text hides a password; it still unwraps to
// the original for errors.Is and errors.As.
type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// Init prepares the store url names for team: the file store creates the
// team directory; PostgreSQL applies the schema's migrations.
func Init(ctx context.Context, rawURL string, o Options, team string) (*protocol.StoreInit, error) {
	kind, home, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	rec := &protocol.StoreInit{Type: "init", Store: kind, Team: team}
	if kind == "file" {
		if home == "" {
			home = o.Home
		}
		d, err := teamdir.New(home, team)
		if err != nil {
			return nil, &InputError{err.Error()}
		}
		if err := d.Ensure(); err != nil {
			return nil, err
		}
		rec.Dir = d.Path()
		return rec, nil
	}
	v, err := migratePostgres(ctx, rawURL)
	if err != nil {
		return nil, redactErr(rawURL, err)
	}
	rec.SchemaVersion = v
	return rec, nil
}
