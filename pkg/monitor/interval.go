package monitor

import (
	"fmt"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
)

// IntervalError is a heartbeat limit too short for a worker's beat: a
// healthy worker would be judged stale between two beats. A watcher
// refuses to act under it.
type IntervalError struct {
	Worker   string
	Interval time.Duration // the worker's beat interval
	Limit    time.Duration // the stale limit
}

func (e *IntervalError) Error() string {
	return fmt.Sprintf("the stale limit --stale %s is shorter than twice worker %s's beat interval of %s: it would kill a healthy worker; give --stale %s or more, or make the worker beat more often",
		e.Limit, e.Worker, e.Interval, 2*e.Interval)
}

// checkIntervals refuses a stale limit shorter than twice the beat
// interval a live worker records (heartbeat_interval_ms). Ended workers
// and records of processes that are gone do not count.
func (w *Watcher) checkIntervals(rd *reader, recs []*protocol.Worker, now time.Time) error {
	for _, r := range recs {
		if r.HeartbeatIntervalMS <= 0 {
			continue
		}
		every := time.Duration(r.HeartbeatIntervalMS) * time.Millisecond
		if w.Opts.Heartbeat >= 2*every {
			continue
		}
		if l := Classify(r, now, w.probe(rd, r), w.Opts).Liveness; l == Done || l == Dead {
			continue
		}
		return &IntervalError{Worker: r.Worker, Interval: every, Limit: w.Opts.Heartbeat}
	}
	return nil
}
