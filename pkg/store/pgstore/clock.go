package pgstore

import (
	"fmt"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// A worker record's times (heartbeat_at, progress_at, started_at,
// approval.since) are in the clock of the host that wrote it, and readers
// on other hosts judge them by theirs: a host whose clock lags would make
// its live workers look stale everywhere else. The server measures every
// writer's clock when it writes a record (the workers row's clock_lag_ms:
// how far the server's clock is ahead of the writer's), and every reader's
// when it reads; the reader gets the times moved into its own clock. So
// staleness is judged by one clock, the server's, whatever the hosts'
// clocks say; what remains is the network's one-way delay, milliseconds.

// clockTolerance: clocks that agree this well need no moving, and a
// record read on the host that wrote it comes back exactly as written.
const clockTolerance = time.Second

// lagSQL is the SQL of the lag, in milliseconds, of a client whose time
// when it sent the statement is parameter $n.
func lagSQL(n int) string {
	return fmt.Sprintf("(extract(epoch FROM statement_timestamp() - $%d::timestamptz) * 1000)::bigint", n)
}

// inReaderClock moves rec's times from the clock of its writer, whose lag
// was writer (nil: not measured), into that of a reader whose lag is
// reader.
func inReaderClock(rec *protocol.Worker, writer *int64, reader int64) {
	if writer == nil || rec == nil {
		return
	}
	d := time.Duration(*writer-reader) * time.Millisecond
	if d > -clockTolerance && d < clockTolerance {
		return
	}
	ts := []*time.Time{&rec.HeartbeatAt, &rec.ProgressAt, &rec.StartedAt}
	if rec.Approval != nil {
		ts = append(ts, &rec.Approval.Since)
	}
	for _, t := range ts {
		if !t.IsZero() {
			*t = t.Add(d)
		}
	}
}
