// Package pgstore is the team store on PostgreSQL (issue 17): the same
// tasks, journal, worker records and budget as the team directory, in
// tables that workers on many hosts share. docs/postgres.md describes the
// schema for psql users.
//
// Semantics are the file store's (*queue.Queue, package queue): the same
// checks and errors (queue's shared rules), the same records. What differs
// is how they hold under concurrency:
//
//   - a claim takes the best claimable row with FOR UPDATE SKIP LOCKED,
//     so claimers never wait for each other;
//   - renew, complete, fail and release check the fencing token in the
//     WHERE clause of the statement that changes the row;
//   - every change appends its journal events in its own transaction,
//     numbered from a sequence, and after the commit a NOTIFY on the
//     team's channel (notifier) wakes followers and waiting claimers,
//     which catch up by number (follower: numbers have gaps and may
//     commit out of order);
//   - times come from the server's clock (now()), one clock for every host.
package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// DefaultMaxConns is the pool size when the URL sets no pool_max_conns.
const DefaultMaxConns = 16

// opTimeout bounds one call of a method without a context.
const opTimeout = time.Minute

// Store is the PostgreSQL team store.
type Store struct {
	pool  *pgxpool.Pool
	cfg   *pgxpool.Config
	notes *notifier
	// oneShot: Options.OneShot.
	oneShot bool
	// schemaOK: the database is known to be at this program's schema
	// version.
	schemaOK atomic.Bool
	// wakes are the listeners of waiting claims, one per team.
	wakes wakeups
	// onWait, for tests, is called when a waiting claim starts to wait.
	onWait func()
	// clock is this host's clock, for worker records' times (clock.go);
	// nil: time.Now. Tests set a clock that is off.
	clock func() time.Time
}

func (s *Store) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

var _ store.Store = (*Store)(nil)

// Options tune a store.
type Options struct {
	// OneShot: the process makes a few calls and exits (a pg-queue
	// command). Statements are sent without preparing them first
	// (pgx.QueryExecModeExec): one round trip each instead of two, while
	// preparing would pay off only over many calls of a long-lived pool.
	// And the schema version is not checked in a round trip of its own
	// when the store opens: the first claim, renew or complete checks it
	// in its own round trip (guardSQL), any other first call before it
	// runs; and a claim, renew or complete wakes the listeners in its
	// round trip too, rather than in one more.
	OneShot bool
	// Began is when the command began to reach the store, if before this
	// call: the first connection then gets what is left of the connect
	// timeout (connect_timeout, 15s by default) rather than all of it. A
	// command whose store agent could not reach the server (pg-queue)
	// falls back on a direct connection without waiting it all again.
	Began time.Time
}

// Open connects to the database of url (a postgres:// URL or a libpq
// keyword string; PG* variables fill what it leaves out) and brings its
// schema up to date.
func Open(ctx context.Context, url string) (store.Store, error) {
	return OpenOptions(ctx, url, Options{})
}

// OpenOptions is Open with options.
func OpenOptions(ctx context.Context, url string, o Options) (store.Store, error) {
	cfg, err := parseConfig(url)
	if err != nil {
		return nil, err
	}
	if o.OneShot && !strings.Contains(url, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	var connectBy time.Time
	if d := cfg.ConnConfig.ConnectTimeout; !o.Began.IsZero() && d > 0 {
		connectBy = o.Began.Add(d)
	}
	s, err := openConfig(ctx, cfg, o.OneShot, connectBy)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenStore is Open with the concrete type.
func OpenStore(ctx context.Context, url string) (*Store, error) {
	cfg, err := parseConfig(url)
	if err != nil {
		return nil, err
	}
	return openConfig(ctx, cfg, false, time.Time{})
}

// openConfig opens the pool and connects, by connectBy when it is set;
// a store that is not one-shot then brings the schema up to date.
func openConfig(ctx context.Context, cfg *pgxpool.Config, oneShot bool, connectBy time.Time) (*Store, error) {
	s := &Store{cfg: cfg, oneShot: oneShot}
	if oneShot {
		cfg.PrepareConn = s.prepareConn
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, connectErr(cfg, err)
	}
	s.pool = pool
	// Connect now, so that a server out of reach fails Open; a one-shot
	// store checks the schema later (prepareConn, guarded).
	cctx := ctx
	if !connectBy.IsZero() {
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadline(ctx, connectBy)
		defer cancel()
	}
	c, err := pool.Acquire(withOwnCheck(cctx))
	if err != nil {
		pool.Close()
		return nil, openErr(cfg, err)
	}
	c.Release()
	if !oneShot {
		if _, err := migrate(ctx, pool); err != nil {
			pool.Close()
			return nil, openErr(cfg, err)
		}
		s.schemaOK.Store(true)
	}
	s.notes = newNotifier(s)
	return s, nil
}

// badURL is a store URL the driver cannot read: bad input.
type badURL struct{ err error }

func (e *badURL) Error() string  { return "store URL: " + e.err.Error() }
func (e *badURL) Unwrap() error  { return e.err }
func (e *badURL) BadInput() bool { return true }

func parseConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, &badURL{err}
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 15 * time.Second
	}
	return cfg, nil
}

// Kind is "postgres".
func (s *Store) Kind() string { return "postgres" }

// Close wakes the listeners of the last changes and closes the pool.
func (s *Store) Close() error {
	s.closeWakeups()
	s.notes.close()
	s.pool.Close()
	return nil
}

// Pool is the connection pool (for tests and tools that read the tables).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Team returns one team's state.
func (s *Store) Team(name string) (store.Team, error) {
	if err := teamdir.ValidName("team", name); err != nil {
		return nil, &queue.InputError{Index: -1, Msg: err.Error()}
	}
	return &team{s: s, name: name}, nil
}

type team struct {
	s    *Store
	name string
}

func (t *team) Name() string           { return t.name }
func (t *team) Tasks() store.Tasks     { return &tasks{s: t.s, team: t.name} }
func (t *team) Journal() store.Journal { return &journal{s: t.s, team: t.name} }
func (t *team) Workers() store.Workers { return &workers{s: t.s, team: t.name} }
func (t *team) Budget() store.Budget   { return &budget{s: t.s, team: t.name} }

// Exists reports fs.ErrNotExist for a team nothing was ever written to.
func (t *team) Exists(ctx context.Context) error {
	var ok bool
	err := t.s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM teams WHERE team = $1)
		OR EXISTS (SELECT 1 FROM workers WHERE team = $1 AND (record IS NOT NULL OR velocity IS NOT NULL))
		OR EXISTS (SELECT 1 FROM budgets WHERE team = $1 AND document IS NOT NULL)`, t.name).Scan(&ok)
	if err != nil {
		return fmt.Errorf("team %s: %w", t.name, err)
	}
	if !ok {
		// As the file store says it; teamdir.ErrNoTeam is fs.ErrNotExist.
		return fmt.Errorf("team %q %w: no task, worker or budget in the database", t.name, teamdir.ErrNoTeam)
	}
	return nil
}

func opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// channel is the team's LISTEN/NOTIFY channel: "powerglide:<team>", or a
// hash of the name when that is longer than an identifier may be.
func channel(team string) string {
	c := "powerglide:" + team
	if len(c) > 63 {
		sum := sha256.Sum256([]byte(team))
		c = "powerglide:" + hex.EncodeToString(sum[:16])
	}
	return c
}

// inTx runs fn in a transaction and commits it.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
