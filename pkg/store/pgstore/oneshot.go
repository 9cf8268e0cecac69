package pgstore

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// What a one-shot store (Options.OneShot: a pg-queue command, a fresh
// process and a fresh server backend per call) does to save round trips:
// the schema check travels with the first change (guardSQL), and the
// NOTIFY after a change's commit with the change.

// ownCheckKey marks the context of a connection's use that checks the
// schema itself, or needs no check (prepareConn).
type ownCheckKey struct{}

func withOwnCheck(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownCheckKey{}, true)
}

// prepareConn checks the schema before a one-shot store's first use of a
// connection that does not check it itself: guardSQL, and migrateConn
// when that fails, as Open does for other stores.
func (s *Store) prepareConn(ctx context.Context, conn *pgx.Conn) (bool, error) {
	if s.schemaOK.Load() || ctx.Value(ownCheckKey{}) != nil {
		return true, nil
	}
	_, err := conn.Exec(ctx, guardSQL)
	if isGuardErr(err) {
		_, err = migrateConn(ctx, conn)
	}
	if err != nil {
		return conn.PgConn().TxStatus() == 'I' && !conn.IsClosed(), connectErr(s.cfg, err)
	}
	s.schemaOK.Store(true)
	return true, nil
}

// checkSchema is migrateConn on a connection of the pool.
func (s *Store) checkSchema(ctx context.Context) error {
	if _, err := migrate(ctx, s.pool); err != nil {
		return connectErr(s.cfg, err)
	}
	s.schemaOK.Store(true)
	return nil
}

// changedFlag ends the select list of a statement for changeRow: the
// statement returns a row when it changed one, and then sets
// powerglide.changed, for its transaction only (a pool's connections keep
// nothing; the notifier wakes the listeners), or in a one-shot store for
// the session (sessionFlag), for notifyChangedSQL to read after the
// commit.
const (
	changedFlag = `, set_config('powerglide.changed', 'on', true)`
	sessionFlag = `, set_config('powerglide.changed', 'on', false)`
)

// notifyChangedSQL is notifySQL if the last statement of changeRow on the
// session changed a row; it clears the flag (CASE: in that order).
const notifyChangedSQL = notifySQL + ` WHERE CASE WHEN current_setting('powerglide.changed', true) = 'on'
	THEN set_config('powerglide.changed', '', false) = '' ELSE false END`

// changeRow runs sql, a statement that changes rows of team, appends
// their journal events and, when it changed one, returns one row that ends
// with changedFlag; it scans that row into dest (pgx.ErrNoRows when there
// is none). After a change, the team's listeners are woken, after the
// commit; work: the change may have made a task claimable (see notifier).
//
// A one-shot store sends all of it in one round trip: the schema guard
// while the schema is unchecked, then the statement in a transaction of
// its own (BEGIN, COMMIT), then the NOTIFY in another, as the notifier
// would send it, if the statement changed a row (notifyChangedSQL).
func (s *Store) changeRow(ctx context.Context, team string, work bool, sql string, args []any, dest ...any) error {
	var flag string
	dest = append(dest, &flag)
	if !s.oneShot {
		err := s.pool.QueryRow(ctx, sql, args...).Scan(dest...)
		if err == nil {
			s.notes.changed(team, work)
		}
		return err
	}
	sql = strings.Replace(sql, changedFlag, sessionFlag, 1)
	err := s.sendChange(ctx, team, work, sql, args, dest)
	if isGuardErr(err) {
		if err := s.checkSchema(ctx); err != nil {
			return err
		}
		err = s.sendChange(ctx, team, work, sql, args, dest)
	}
	return err
}

func (s *Store) sendChange(ctx context.Context, team string, work bool, sql string, args []any, dest []any) error {
	conn, err := s.pool.Acquire(withOwnCheck(ctx))
	if err != nil {
		return connectErr(s.cfg, err)
	}
	defer conn.Release()
	guard := !s.schemaOK.Load()
	b := &pgx.Batch{}
	if guard {
		b.Queue(guardSQL)
	}
	payload := ""
	if work {
		payload = workPayload
	}
	b.Queue("BEGIN")
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	b.Queue(notifyChangedSQL, []string{channel(team)}, []string{payload})
	br := conn.SendBatch(ctx, b)
	err = func() error {
		if guard {
			if _, err := br.Exec(); err != nil {
				return err
			}
			s.schemaOK.Store(true)
		}
		if _, err := br.Exec(); err != nil { // BEGIN
			return err
		}
		err := br.QueryRow().Scan(dest...)
		if err != nil && !isNoRows(err) {
			return err
		}
		if _, cerr := br.Exec(); cerr != nil { // COMMIT
			return cerr
		}
		// The NOTIFY, after the commit: best effort, as the notifier's
		// (a full notification queue does not undo the change).
		br.Exec()
		return err
	}()
	br.Close() // all that counts was read: the commit is past
	if st := conn.Conn().PgConn().TxStatus(); st != 'I' && !conn.Conn().IsClosed() {
		// Failed inside BEGIN: the commit never came.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
			conn.Conn().Close(ctx)
		}
	}
	return err
}
