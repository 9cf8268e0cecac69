package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// txn is a transaction of a task change that costs as few round trips as
// the change allows: its BEGIN travels with its first statements
// (SendBatch), and its COMMIT with the journal append that ends it
// (commit). So the team's row, which the append locks, is held for no
// round trip to the client: the server appends and commits in one go.
type txn struct {
	s     *Store
	conn  *pgxpool.Conn
	begun bool
}

func (s *Store) beginTxn(ctx context.Context) (*txn, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, connectErr(s.cfg, err)
	}
	return &txn{s: s, conn: conn}, nil
}

// start sends BEGIN alone, for statements sent one by one.
func (tx *txn) start(ctx context.Context) error {
	if tx.begun {
		return nil
	}
	if _, err := tx.conn.Exec(ctx, "BEGIN"); err != nil {
		return err
	}
	tx.begun = true
	return nil
}

// SendBatch sends b, after BEGIN when the transaction has not begun.
func (tx *txn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if tx.begun {
		return tx.conn.SendBatch(ctx, b)
	}
	nb := &pgx.Batch{}
	nb.Queue("BEGIN")
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	br := tx.conn.SendBatch(ctx, nb)
	tx.begun = true
	br.Exec() // BEGIN: when it fails, so do the statements after it
	return br
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type errRows struct{ err error }

func (r errRows) Close()                                       {}
func (r errRows) Err() error                                   { return r.err }
func (r errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r errRows) Next() bool                                   { return false }
func (r errRows) Scan(...any) error                            { return r.err }
func (r errRows) Values() ([]any, error)                       { return nil, r.err }
func (r errRows) RawValues() [][]byte                          { return nil }
func (r errRows) Conn() *pgx.Conn                              { return nil }
func (r errRows) TypeMap() *pgtype.Map                         { return nil }

func (tx *txn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := tx.start(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return tx.conn.Exec(ctx, sql, args...)
}

func (tx *txn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := tx.start(ctx); err != nil {
		return errRows{err}, err
	}
	return tx.conn.Query(ctx, sql, args...)
}

func (tx *txn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := tx.start(ctx); err != nil {
		return errRow{err}
	}
	return tx.conn.QueryRow(ctx, sql, args...)
}

func (tx *txn) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := tx.start(ctx); err != nil {
		return 0, err
	}
	return tx.conn.CopyFrom(ctx, table, cols, src)
}

// commit appends recs to the team's journal and commits, in one round
// trip, and has the team's listeners woken.
func (tx *txn) commit(ctx context.Context, team string, recs []record) error {
	if !tx.begun && len(recs) == 0 {
		return nil // nothing was sent
	}
	b := &pgx.Batch{}
	if len(recs) > 0 {
		queueAppend(b, team, recs)
	}
	b.Queue("COMMIT")
	br := tx.SendBatch(ctx, b)
	var err error
	for i := 0; i < len(b.QueuedQueries)-1 && err == nil; i++ { // the append
		if _, err = br.Exec(); err != nil {
			err = fmt.Errorf("append to the journal of team %s: %w", team, err)
		}
	}
	if err == nil {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err == nil && tag.String() != "COMMIT" {
			err = fmt.Errorf("commit: the transaction was rolled back (%s)", tag)
		}
	}
	br.Close() // once COMMIT has succeeded, the change is made, whatever follows
	if err == nil && len(recs) > 0 {
		work := false
		for _, r := range recs {
			work = work || frees(r.op)
		}
		tx.s.notes.changed(team, work)
	}
	return err
}

// end returns the connection to the pool, rolling back what was not
// committed; a connection that cannot roll back is closed.
func (tx *txn) end() {
	defer tx.conn.Release()
	if tx.conn.Conn().PgConn().TxStatus() == 'I' || tx.conn.Conn().IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tx.conn.Exec(ctx, "ROLLBACK"); err != nil {
		tx.conn.Conn().Close(ctx)
	}
}
