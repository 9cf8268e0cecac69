package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// workers are a team's worker records: rows of workers.
type workers struct {
	s    *Store
	team string
}

var _ store.Workers = (*workers)(nil)

func badName(err error) error { return &queue.InputError{Index: -1, Msg: err.Error()} }

// decodeWorker decodes the record of the row whose key is worker: one
// that names another worker, or whose key is not a valid name, is
// unreadable (teamdir.CheckWorkerKey).
func decodeWorker(worker string, b []byte) (*protocol.Worker, error) {
	var w protocol.Worker
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("worker %q: stored record: %w", worker, err)
	}
	if err := teamdir.CheckWorkerKey(worker, &w); err != nil {
		return nil, fmt.Errorf("worker %q: stored record: %w", worker, err)
	}
	return &w, nil
}

// Read returns one record, or an error wrapping fs.ErrNotExist.
func (w *workers) Read(ctx context.Context, worker string) (*protocol.Worker, error) {
	if err := teamdir.ValidName("worker", worker); err != nil {
		return nil, badName(err)
	}
	var b []byte
	var writer *int64
	var reader int64
	err := w.s.pool.QueryRow(ctx, `SELECT record, clock_lag_ms, `+lagSQL(3)+` FROM workers WHERE team = $1 AND worker = $2 AND record IS NOT NULL`,
		w.team, worker, w.s.now()).Scan(&b, &writer, &reader)
	if isNoRows(err) {
		return nil, fmt.Errorf("worker %s of team %s: %w", worker, w.team, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	rec, err := decodeWorker(worker, b)
	inReaderClock(rec, writer, reader)
	return rec, err
}

// Update changes a record under its row lock: the row is made first when
// there is none, so that two first updates also take turns.
func (w *workers) Update(ctx context.Context, worker string, fn func(old *protocol.Worker) (*protocol.Worker, error)) (*protocol.Worker, error) {
	if err := teamdir.ValidName("worker", worker); err != nil {
		return nil, badName(err)
	}
	var out *protocol.Worker
	err := w.s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO workers (team, worker) VALUES ($1, $2) ON CONFLICT DO NOTHING`, w.team, worker); err != nil {
			return err
		}
		var b []byte
		var writer *int64
		var reader int64
		if err := tx.QueryRow(ctx, `SELECT record, clock_lag_ms, `+lagSQL(3)+` FROM workers WHERE team = $1 AND worker = $2 FOR UPDATE`,
			w.team, worker, w.s.now()).Scan(&b, &writer, &reader); err != nil {
			return err
		}
		var old *protocol.Worker
		if b != nil {
			old, _ = decodeWorker(worker, b) // unreadable: nil, a heartbeat must go through
			inReaderClock(old, writer, reader)
		}
		rec, err := fn(old)
		if err != nil || rec == nil {
			out = rec
			return err
		}
		if rec.Worker != worker {
			return &queue.InputError{Index: -1, Msg: fmt.Sprintf("worker record of %q written as %q", worker, rec.Worker)}
		}
		out = rec
		return write(ctx, tx, w.team, rec, w.s.now)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// write stores a record, with the lag of the writer's clock (now), and
// the heartbeat_at column in the server's clock.
func write(ctx context.Context, db querier, team string, rec *protocol.Worker, now func() time.Time) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	var hb any
	if !rec.HeartbeatAt.IsZero() {
		hb = rec.HeartbeatAt
	}
	_, err = db.Exec(ctx, `INSERT INTO workers (team, worker, host, heartbeat_at, record, updated_at, clock_lag_ms)
		VALUES ($1, $2, $3, $4::timestamptz + (statement_timestamp() - $6::timestamptz), $5::json, now(), `+lagSQL(6)+`)
		ON CONFLICT (team, worker) DO UPDATE SET host = excluded.host, heartbeat_at = excluded.heartbeat_at,
			record = excluded.record, updated_at = now(), clock_lag_ms = excluded.clock_lag_ms`, team, rec.Worker, rec.Host, hb, string(b), now())
	return err
}

// Write replaces a record without reading it.
func (w *workers) Write(ctx context.Context, rec *protocol.Worker) error {
	if err := teamdir.ValidName("worker", rec.Worker); err != nil {
		return badName(err)
	}
	return write(ctx, w.s.pool, w.team, rec, w.s.now)
}

// List returns every record, sorted as teamdir.WorkerLess sorts names.
func (w *workers) List(ctx context.Context) ([]*protocol.Worker, []error) {
	rows, _ := w.s.pool.Query(ctx, `SELECT worker, record, clock_lag_ms, `+lagSQL(2)+` FROM workers WHERE team = $1 AND record IS NOT NULL`,
		w.team, w.s.now())
	var out []*protocol.Worker
	var errs []error
	var name string
	var b []byte
	var writer *int64
	var reader int64
	_, err := pgx.ForEachRow(rows, []any{&name, &b, &writer, &reader}, func() error {
		rec, err := decodeWorker(name, b)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		inReaderClock(rec, writer, reader)
		out = append(out, rec)
		return nil
	})
	if err != nil {
		return nil, []error{err}
	}
	sort.Slice(out, func(i, j int) bool { return teamdir.WorkerLess(out[i].Worker, out[j].Worker) })
	return out, errs
}

// Velocity returns the operator's setting for a worker: 1 when none.
func (w *workers) Velocity(ctx context.Context, worker string) (float64, error) {
	if err := teamdir.ValidName("worker", worker); err != nil {
		return 0, badName(err)
	}
	var v *float64
	err := w.s.pool.QueryRow(ctx, `SELECT velocity FROM workers WHERE team = $1 AND worker = $2`, w.team, worker).Scan(&v)
	if isNoRows(err) || (err == nil && v == nil) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	return *v, nil
}

// SetVelocity records the operator's setting for a worker.
func (w *workers) SetVelocity(ctx context.Context, worker string, v float64) error {
	if err := teamdir.ValidName("worker", worker); err != nil {
		return badName(err)
	}
	if err := teamdir.CheckVelocity(v); err != nil {
		return badName(err)
	}
	_, err := w.s.pool.Exec(ctx, `INSERT INTO workers (team, worker, velocity) VALUES ($1, $2, $3)
		ON CONFLICT (team, worker) DO UPDATE SET velocity = excluded.velocity`, w.team, worker, v)
	return err
}

// Answer stores the answer on the worker's row, under the row lock, once
// the record shows the call waiting.
func (w *workers) Answer(ctx context.Context, a protocol.ApprovalAnswer) error {
	if err := teamdir.ValidName("worker", a.Worker); err != nil {
		return badName(err)
	}
	a.Type = "approval_answer"
	ans, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return w.s.inTx(ctx, func(tx pgx.Tx) error {
		var b []byte
		err := tx.QueryRow(ctx, `SELECT record FROM workers WHERE team = $1 AND worker = $2 AND record IS NOT NULL FOR UPDATE`,
			w.team, a.Worker).Scan(&b)
		if isNoRows(err) {
			return fmt.Errorf("worker %s of team %s: %w", a.Worker, w.team, fs.ErrNotExist)
		}
		if err != nil {
			return err
		}
		rec, err := decodeWorker(a.Worker, b)
		if err != nil {
			return err
		}
		if err := teamdir.Waiting(a, rec); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE workers SET answer = $3::json WHERE team = $1 AND worker = $2`, w.team, a.Worker, string(ans))
		return err
	})
}

// TakeAnswer clears the worker's answer to call and returns it.
func (w *workers) TakeAnswer(ctx context.Context, worker, call string) (protocol.ApprovalAnswer, bool, error) {
	var a protocol.ApprovalAnswer
	if err := teamdir.ValidName("worker", worker); err != nil {
		return a, false, badName(err)
	}
	var b []byte
	err := w.s.pool.QueryRow(ctx, `UPDATE workers w SET answer = NULL
		FROM (SELECT answer FROM workers WHERE team = $1 AND worker = $2 AND answer->>'call' = $3 FOR UPDATE) old
		WHERE w.team = $1 AND w.worker = $2
		RETURNING old.answer`, w.team, worker, call).Scan(&b)
	if isNoRows(err) {
		return a, false, nil
	}
	if err != nil {
		return a, false, err
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, false, fmt.Errorf("worker %s: stored answer: %w", worker, err)
	}
	return a, true, nil
}
