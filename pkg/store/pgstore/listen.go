package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// listener is a connection of its own that LISTENs on a team's channel:
// waiters sleep on it until a change is announced or a timeout passes.
// When the connection breaks (a server restart), the next wait connects
// again; meanwhile waits are plain sleeps, and callers look again after
// every wait, so nothing depends on a notification arriving.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string
	conn    *pgx.Conn
	backoff time.Duration
	// workOnly: wake only for changes that may have made a task
	// claimable (notifier's workPayload), as a waiting claim wants.
	workOnly bool
}

func newListener(cfg *pgx.ConnConfig, channel string) *listener {
	return &listener{cfg: cfg, channel: channel}
}

// listen connects and LISTENs, when not connected.
func (l *listener) listen(ctx context.Context) error {
	if l.conn != nil && !l.conn.IsClosed() {
		return nil
	}
	l.close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, l.cfg.Copy())
	if err != nil {
		return err
	}
	if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return err
	}
	l.conn, l.backoff = conn, 0
	return nil
}

// wait returns after a notification, after d, or with ctx's error when ctx
// ends. Connection trouble is not an error: it waits instead.
func (l *listener) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if err := l.listen(ctx); err != nil {
		// Down: back off, up to d and at most a second.
		l.backoff = min(max(2*l.backoff, 50*time.Millisecond), time.Second, d)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(l.backoff):
			return nil
		}
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	n, err := l.conn.WaitForNotification(wctx)
	for err == nil && l.workOnly && n.Payload != workPayload {
		n, err = l.conn.WaitForNotification(wctx)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && !timeout(err) {
		l.close() // broken: connect again next time
	}
	return nil
}

func timeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)
}

func (l *listener) close() {
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		l.conn.Close(ctx)
		cancel()
		l.conn = nil
	}
}
