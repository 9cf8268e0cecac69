package pgstore

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Channel is channel, for the tests of package pgstore_test.
var Channel = channel

// OpenCounting is OpenStore on connections that count the round trips
// they make in trips: a write that follows a read (or opens the
// connection) starts one.
func OpenCounting(ctx context.Context, url string, trips *atomic.Int64) (*Store, error) {
	return OpenCountingOptions(ctx, url, trips, Options{})
}

// OpenCountingOptions is OpenCounting with options.
func OpenCountingOptions(ctx context.Context, url string, trips *atomic.Int64, o Options) (*Store, error) {
	cfg, err := parseConfig(url)
	if err != nil {
		return nil, err
	}
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc := &countingConn{Conn: c, trips: trips}
		cc.read.Store(true)
		return cc, nil
	}
	if o.OneShot {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	return openConfig(ctx, cfg, o.OneShot, time.Time{})
}

// countingConn counts round trips: a write after a read starts one. pgx
// reads in a goroutine of its own (its background reader) while another
// writes (Close's terminate message), so the flag is atomic.
type countingConn struct {
	net.Conn
	trips *atomic.Int64
	read  atomic.Bool // the last call was a read
}

func (c *countingConn) Read(b []byte) (int, error) {
	c.read.Store(true)
	return c.Conn.Read(b)
}

func (c *countingConn) Write(b []byte) (int, error) {
	if c.read.Swap(false) {
		c.trips.Add(1)
	}
	return c.Conn.Write(b)
}

// OnWait has f called whenever a waiting claim of s is about to block
// (after it listens and has looked for a task once more).
func OnWait(s *Store, f func()) { s.onWait = f }

// SetClock makes f the clock of s's host (a host whose clock is off).
func SetClock(s *Store, f func() time.Time) { s.clock = f }
