package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one file of migrations/: NNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, p := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(p, "migrations/"), ".sql")
		num, name, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration %s: the name must start with its version number", p)
		}
		b, err := migrationFiles.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// SchemaVersion is the version of the newest migration.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// lockKey is the pg_advisory_lock key migrations hold: "pgqueue!" as a
// number, so no other program's key is likely to meet it.
const lockKey = 0x7067717565756521

// Migrate brings the database of url to the newest schema: pg-queue init
// --store URL. Open does the same on first use.
func Migrate(ctx context.Context, url string) error {
	cfg, err := parseConfig(url)
	if err != nil {
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return connectErr(cfg, err)
	}
	defer pool.Close()
	_, err = migrate(ctx, pool)
	return err
}

// migrate is migrateConn on a connection of pool.
func migrate(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	conn, err := pool.Acquire(withOwnCheck(ctx))
	if err != nil {
		return 0, connectErr(pool.Config(), err)
	}
	defer conn.Release()
	return migrateConn(ctx, conn.Conn())
}

// The schema marker is a function, powerglide_schema_vN() for schema
// version N, that only a database at version N has: a statement that
// calls it fails (undefined_function) on a database that is older, or
// that a newer powerglide has migrated (which drops it with the others
// when it creates its own). pg-queue's one-shot commands call it in the
// round trip of their first statement (Store.guarded) instead of reading
// schema_migrations in a round trip of its own, and take this slow path
// only when it fails. It is derived from schema_migrations, not a
// migration: migrateConn creates it when it is missing.
func markerName(version int) string { return fmt.Sprintf("powerglide_schema_v%d", version) }

// guardSQL fails unless the database is at the schema version of this
// program, at the cost of a function lookup in the statement's round trip.
var guardSQL = "SELECT " + markerName(SchemaVersion()) + "()"

// isGuardErr reports whether err is guardSQL's failure: no marker of this
// version.
func isGuardErr(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42883" && strings.Contains(pgErr.Message, markerName(SchemaVersion()))
}

// migrateConn applies the migrations the database lacks, one transaction
// each, under an advisory lock so that concurrent first uses apply each
// once, and creates the schema marker. It returns how many it applied.
func migrateConn(ctx context.Context, conn *pgx.Conn) (int, error) {
	ms, err := migrations()
	if err != nil {
		return 0, err
	}
	latest := ms[len(ms)-1].version
	v, marked, err := currentVersion(ctx, conn)
	if err == nil && v > latest {
		return 0, newerErr(v, latest)
	}
	if err == nil && v == latest && marked {
		return 0, nil // the common case: no lock
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(lockKey)); err != nil {
		return 0, fmt.Errorf("lock the schema for migration: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(lockKey))
	if err != nil || v == 0 { // else it exists, and a role that may not create tables may use it
		if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY,
		name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return 0, fmt.Errorf("create schema_migrations: %w", err)
		}
	}
	have := map[int]bool{}
	rows, err := conn.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return 0, fmt.Errorf("read schema_migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, fmt.Errorf("read schema_migrations: %w", err)
	}
	top := 0
	for _, v := range versions {
		have[int(v)] = true
		top = max(top, int(v))
	}
	if top > latest {
		return 0, newerErr(top, latest)
	}
	if top < latest {
		// Tools that know only the older version stop at their next
		// statement, before the schema changes under them.
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return dropMarkers(ctx, tx, "") }); err != nil {
			return 0, fmt.Errorf("schema marker: %w", err)
		}
	}
	n := 0
	for _, m := range ms {
		if have[m.version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name)
			return err
		})
		if err != nil {
			return n, fmt.Errorf("migration %03d_%s: %w", m.version, m.name, err)
		}
		n++
	}
	if err := mark(ctx, conn, latest); err != nil {
		var pgErr *pgconn.PgError
		if n == 0 && errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			// A role that may use the schema but not create functions
			// in it: without a marker, its one-shot commands check the
			// schema here each time, the slow path.
			return 0, nil
		}
		return n, fmt.Errorf("schema marker: %w", err)
	}
	return n, nil
}

// mark creates the schema marker of version, and drops the others.
func mark(ctx context.Context, conn *pgx.Conn, version int) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := dropMarkers(ctx, tx, markerName(version)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, fmt.Sprintf(`CREATE OR REPLACE FUNCTION %s() RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT %d'`,
			markerName(version), version))
		return err
	})
}

// dropMarkers drops the schema markers other than keep.
func dropMarkers(ctx context.Context, tx pgx.Tx, keep string) error {
	rows, err := tx.Query(ctx, `SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'powerglide\_schema\_v%' AND p.proname <> $1`, keep)
	if err != nil {
		return err
	}
	old, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, f := range old {
		if _, err := tx.Exec(ctx, "DROP FUNCTION "+f); err != nil {
			return err
		}
	}
	return nil
}

// currentVersion is the newest applied migration (0 when there is no
// schema_migrations table), and whether its schema marker exists.
func currentVersion(ctx context.Context, conn *pgx.Conn) (int, bool, error) {
	var v *int32
	var marked bool
	err := conn.QueryRow(ctx, "SELECT max(version), to_regproc($1) IS NOT NULL FROM schema_migrations",
		markerName(SchemaVersion())).Scan(&v, &marked)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if v == nil {
		return 0, marked, nil
	}
	return int(*v), marked, nil
}

func newerErr(have, latest int) error {
	return fmt.Errorf("the database's schema is version %d, newer than this program knows (%d): upgrade powerglide", have, latest)
}
