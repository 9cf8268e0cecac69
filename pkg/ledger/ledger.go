// Package ledger keeps a team's budget ledger, budget.json in the team
// directory: the team's dollar budget, the settled cost of its workers'
// model calls, and a reservation for each call in flight.
//
// A worker reserves a call's estimated cost before it makes the call and
// settles the real cost after it, both under the team lock (the queue's
// flock). A call is refused when the settled cost plus its estimate would
// pass the budget, and waits while only other calls' reservations stand in
// its way. No call therefore starts that could take the team past its
// budget: the team overshoots it by no more than the estimates' error.
//
// A reservation of a worker that died does not hold the budget forever: it
// is dropped by the next ledger change once its process is gone (same
// host: pid and start time no longer match), and in any case at its until
// time, TTL after it was made.
package ledger

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/gofrs/flock"
	"github.com/powerglide/powerglide/pkg/atomicfile"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// File is the ledger's name in the team directory.
const File = teamdir.BudgetFile

// DefaultTTL bounds a reservation whose process cannot be checked (another
// host) or that never settles: no model call runs this long.
const DefaultTTL = 30 * time.Minute

// Path is budget.json of the team.
func Path(d teamdir.Dir) string { return d.Budget() }

// Read reads the team's ledger; os.ErrNotExist when the team has none.
func Read(d teamdir.Dir) (*protocol.TeamBudget, error) {
	b, err := os.ReadFile(Path(d))
	if err != nil {
		return nil, err
	}
	var tb protocol.TeamBudget
	if err := json.Unmarshal(b, &tb); err != nil {
		return nil, fmt.Errorf("%s: %w", Path(d), err)
	}
	return &tb, nil
}

// SetBudget writes the team's budget (0: none) into its ledger, making the
// ledger when the team has none: its spent then starts at what the worker
// records say the team spent so far, so earlier runs count.
func SetBudget(d teamdir.Dir, usd float64, now time.Time) (*protocol.TeamBudget, error) {
	if usd < 0 || math.IsNaN(usd) || math.IsInf(usd, 0) {
		return nil, fmt.Errorf("invalid team budget %v", usd)
	}
	var out *protocol.TeamBudget
	err := locked(d, func() error {
		tb, err := Read(d)
		switch {
		case errors.Is(err, os.ErrNotExist):
			tb = &protocol.TeamBudget{Type: "team_budget", Version: 1, SpentUSD: recordsSpent(d)}
		case err != nil:
			return err
		}
		tb.BudgetUSD = usd
		if usd == 0 || tb.SpentUSD < usd {
			tb.Refused = nil // a new budget: the last refusal no longer stands
		}
		out = tb
		return write(d, tb, now)
	})
	return out, err
}

// recordsSpent is the team's spending as the worker records keep it.
func recordsSpent(d teamdir.Dir) float64 {
	recs, _ := d.Workers()
	var c float64
	for _, r := range recs {
		c += r.Total().CostUSD
	}
	return c
}

// Ledger is one worker's handle on its team's ledger.
type Ledger struct {
	Dir      teamdir.Dir
	Worker   string
	PID      int
	PIDStart string
	Host     string
	TTL      time.Duration    // 0: DefaultTTL
	Now      func() time.Time // nil: time.Now
}

// New returns the ledger handle of this process as worker w.
func New(d teamdir.Dir, worker string) *Ledger {
	pid, start, _ := proc.Self()
	host, _ := os.Hostname()
	return &Ledger{Dir: d, Worker: worker, PID: pid, PIDStart: start, Host: host}
}

// ExhaustedError is a call refused: the team's settled cost plus the
// call's estimate would pass the budget.
type ExhaustedError struct {
	EstimateUSD, SpentUSD, BudgetUSD float64
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("the next call could cost $%.4f with $%.4f spent by the team, past the team budget of $%.4f", e.EstimateUSD, e.SpentUSD, e.BudgetUSD)
}

// BusyError is a call that fits the budget only once other calls in flight
// have settled (their reservations are estimates, usually above the real
// cost): wait and reserve again.
type BusyError struct {
	EstimateUSD, SpentUSD, ReservedUSD, BudgetUSD float64
	Calls                                         int
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("the next call could cost $%.4f; $%.4f is spent and $%.4f reserved by %d call(s) in flight, of a team budget of $%.4f", e.EstimateUSD, e.SpentUSD, e.ReservedUSD, e.Calls, e.BudgetUSD)
}

// Reserve books a call estimated at usd. It returns the reservation's id,
// or "" when the team has no ledger (no team budget was ever set), an
// *ExhaustedError when the call could pass the budget, a *BusyError when
// it could only because of other calls in flight.
func (l *Ledger) Reserve(usd float64) (string, error) {
	if _, err := os.Stat(Path(l.Dir)); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	id := ""
	err := locked(l.Dir, func() error {
		tb, err := Read(l.Dir)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		now := l.now()
		l.expire(tb, now)
		if b := tb.BudgetUSD; b > 0 {
			var refused error
			switch {
			case tb.SpentUSD+usd > b, tb.SpentUSD >= b: // (an unpriced call has no estimate)
				refused = &ExhaustedError{EstimateUSD: usd, SpentUSD: tb.SpentUSD, BudgetUSD: b}
			case tb.SpentUSD+tb.ReservedUSD+usd > b:
				refused = &BusyError{EstimateUSD: usd, SpentUSD: tb.SpentUSD, ReservedUSD: tb.ReservedUSD, BudgetUSD: b, Calls: len(tb.Reservations)}
			}
			if _, ok := refused.(*ExhaustedError); ok {
				tb.Refused = &protocol.BudgetRefusal{Worker: l.Worker, At: now, Reason: refused.Error()}
				if err := write(l.Dir, tb, now); err != nil {
					return err
				}
			}
			if refused != nil {
				return refused
			}
		}
		id = newID(l.Worker)
		tb.Reservations = append(tb.Reservations, protocol.Reservation{ID: id, Worker: l.Worker, PID: l.PID, PIDStart: l.PIDStart,
			Host: l.Host, USD: usd, At: now, Until: now.Add(l.ttl())})
		tb.ReservedUSD = reserved(tb)
		return write(l.Dir, tb, now)
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// Settle ends reservation id with the call's real cost. A reservation that
// expired in the meantime is gone; its cost still counts.
func (l *Ledger) Settle(id string, usd float64) error {
	if id == "" {
		return nil
	}
	return locked(l.Dir, func() error {
		tb, err := Read(l.Dir)
		if errors.Is(err, os.ErrNotExist) {
			tb = &protocol.TeamBudget{Type: "team_budget", Version: 1} // removed by hand meanwhile
		} else if err != nil {
			return err
		}
		now := l.now()
		kept := tb.Reservations[:0]
		for _, r := range tb.Reservations {
			if r.ID != id {
				kept = append(kept, r)
			}
		}
		tb.Reservations = kept
		l.expire(tb, now)
		tb.SpentUSD += usd
		tb.Calls++
		return write(l.Dir, tb, now)
	})
}

// Expire drops the reservations of processes that are gone and those past
// their until time, and reports how many it dropped. Reserve and Settle do
// it on their own; pg-monitor does it before it reports.
func Expire(d teamdir.Dir, now time.Time) (int, error) {
	host, _ := os.Hostname()
	l := &Ledger{Dir: d, Host: host}
	n := 0
	err := locked(d, func() error {
		tb, err := Read(d)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		n = l.expire(tb, now)
		if n == 0 {
			return nil
		}
		return write(d, tb, now)
	})
	return n, err
}

// expire drops dead and expired reservations from tb.
func (l *Ledger) expire(tb *protocol.TeamBudget, now time.Time) int {
	kept := tb.Reservations[:0]
	n := 0
	for _, r := range tb.Reservations {
		gone := r.Host == l.Host && !proc.Matches(r.PID, r.PIDStart)
		if gone || !now.Before(r.Until) {
			n++
			continue
		}
		kept = append(kept, r)
	}
	tb.Reservations = kept
	tb.ReservedUSD = reserved(tb)
	return n
}

func reserved(tb *protocol.TeamBudget) float64 {
	var s float64
	for _, r := range tb.Reservations {
		s += r.USD
	}
	return s
}

func (l *Ledger) now() time.Time {
	if l.Now != nil {
		return l.Now().UTC()
	}
	return time.Now().UTC()
}

func (l *Ledger) ttl() time.Duration {
	if l.TTL > 0 {
		return l.TTL
	}
	return DefaultTTL
}

func newID(worker string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "r-" + worker + "-" + hex.EncodeToString(b[:])
}

// locked runs fn under the team lock, the flock that guards the queue: a
// ledger change is short, and one lock for the team's shared files keeps
// their order simple.
func locked(d teamdir.Dir, fn func() error) error {
	if err := d.Ensure(); err != nil {
		return err
	}
	lk := flock.New(d.Lock())
	if err := lk.Lock(); err != nil {
		return fmt.Errorf("lock %s: %w", d.Lock(), err)
	}
	defer lk.Close()
	return fn()
}

func write(d teamdir.Dir, tb *protocol.TeamBudget, now time.Time) error {
	tb.Type, tb.Version, tb.UpdatedAt = "team_budget", 1, now.UTC()
	if tb.Reservations == nil {
		tb.Reservations = []protocol.Reservation{}
	}
	b, err := json.MarshalIndent(tb, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(Path(d), append(b, '\n'), teamdir.FileMode)
}
