// Package ledger keeps a team's budget ledger: the team's dollar budget,
// the settled cost of its workers' model calls, and a reservation for each
// call in flight. The rules live here; the document lives in the team's
// store (store.Budget: budget.json in the team directory, or a row in
// PostgreSQL), which serializes every change.
//
// A worker reserves a call's estimated cost before it makes the call and
// settles the real cost after it, each one store update. A call is refused
// when the settled cost plus its estimate would pass the budget, and waits
// while only other calls' reservations stand in its way. No call therefore
// starts that could take the team past its budget: the team overshoots it
// by no more than the estimates' error.
//
// A reservation of a worker that died does not hold the budget forever: it
// is reclaimed by the next ledger change once its process is gone (same
// host: pid and start time no longer match), and in any case at its until
// time, TTL after it was made (another host's process cannot be checked,
// nor, on a store several hosts share, one of a reservation without a
// host_id, nor one whose pid_start is malformed). A reclaimed reservation
// is settled at its estimate, since the call it stood for was most likely
// made and paid for (a worker killed mid-call): the ledger errs on the
// side of the budget. A process that settles after its reservation
// expired adds its cost too, so such a call counts twice.
package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"time"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// File is the ledger's name in a team directory.
const File = teamdir.BudgetFile

// DefaultTTL bounds a reservation whose process cannot be checked (another
// host) or that never settles: no model call runs this long.
const DefaultTTL = 30 * time.Minute

// Read reads the team's ledger; an error wrapping fs.ErrNotExist when the
// team has none.
func Read(ctx context.Context, t store.Team) (*protocol.TeamBudget, error) {
	return t.Budget().Read(ctx)
}

// SetBudget writes the team's budget (0: none) into its ledger, making the
// ledger when the team has none: its spent then starts at what the worker
// records say the team spent so far, so earlier runs count.
func SetBudget(ctx context.Context, t store.Team, usd float64, now time.Time) (*protocol.TeamBudget, error) {
	if usd < 0 || math.IsNaN(usd) || math.IsInf(usd, 0) {
		return nil, fmt.Errorf("invalid team budget %v", usd)
	}
	// Read before the update: the records are another part of the store.
	seed := recordsSpent(ctx, t)
	return t.Budget().Update(ctx, func(tb *protocol.TeamBudget) (*protocol.TeamBudget, error) {
		if tb == nil {
			tb = &protocol.TeamBudget{Type: "team_budget", Version: 1, SpentUSD: seed}
		}
		tb.BudgetUSD = usd
		if usd == 0 || tb.SpentUSD < usd {
			tb.Refused = nil // a new budget: the last refusal no longer stands
		}
		stamp(tb, now)
		return tb, nil
	})
}

// recordsSpent is the team's spending as the worker records keep it.
func recordsSpent(ctx context.Context, t store.Team) float64 {
	recs, _ := t.Workers().List(ctx)
	var c float64
	for _, r := range recs {
		c += r.Total().CostUSD
	}
	return c
}

// Ledger is one worker's handle on its team's ledger.
type Ledger struct {
	Team     store.Team
	Worker   string
	PID      int
	PIDStart string
	Host     proc.Host        // where PID lives: reservations of this host's gone processes are dropped
	TTL      time.Duration    // 0: DefaultTTL
	Now      func() time.Time // nil: time.Now
}

// New returns the ledger handle of this process as worker w, on host
// (proc.ThisHost, Shared as the store is: see store.Shared).
func New(t store.Team, worker string, host proc.Host) *Ledger {
	pid, start, _ := proc.Self()
	return &Ledger{Team: t, Worker: worker, PID: pid, PIDStart: start, Host: host}
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
func (l *Ledger) Reserve(ctx context.Context, usd float64) (string, error) {
	// Most teams have no budget: one read, and no update, per call.
	if _, err := l.Team.Budget().Read(ctx); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	id := ""
	var refused error
	_, err := l.Team.Budget().Update(ctx, func(tb *protocol.TeamBudget) (*protocol.TeamBudget, error) {
		id, refused = "", nil
		if tb == nil {
			return nil, nil // removed meanwhile: no budget
		}
		now := l.now()
		l.expire(tb, now)
		if b := tb.BudgetUSD; b > 0 {
			switch {
			case tb.SpentUSD+usd > b, tb.SpentUSD >= b: // (an unpriced call has no estimate)
				refused = &ExhaustedError{EstimateUSD: usd, SpentUSD: tb.SpentUSD, BudgetUSD: b}
				tb.Refused = &protocol.BudgetRefusal{Worker: l.Worker, At: now, Reason: refused.Error()}
				stamp(tb, now)
				return tb, nil
			case tb.SpentUSD+tb.ReservedUSD+usd > b:
				refused = &BusyError{EstimateUSD: usd, SpentUSD: tb.SpentUSD, ReservedUSD: tb.ReservedUSD, BudgetUSD: b, Calls: len(tb.Reservations)}
				return nil, nil
			}
		}
		id = newID(l.Worker)
		tb.Reservations = append(tb.Reservations, protocol.Reservation{ID: id, Worker: l.Worker, PID: l.PID, PIDStart: l.PIDStart,
			Host: l.Host.Name, HostID: l.Host.ID, USD: usd, At: now, Until: now.Add(l.ttl())})
		tb.ReservedUSD = reserved(tb)
		stamp(tb, now)
		return tb, nil
	})
	if err != nil {
		return "", err
	}
	if refused != nil {
		return "", refused
	}
	return id, nil
}

// Settle ends reservation id with the call's real cost. A reservation that
// expired in the meantime was settled at its estimate; the cost is added
// all the same.
func (l *Ledger) Settle(ctx context.Context, id string, usd float64) error {
	if id == "" {
		return nil
	}
	_, err := l.Team.Budget().Update(ctx, func(tb *protocol.TeamBudget) (*protocol.TeamBudget, error) {
		if tb == nil {
			tb = &protocol.TeamBudget{Type: "team_budget", Version: 1} // removed by hand meanwhile
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
		stamp(tb, now)
		return tb, nil
	})
	return err
}

// Expire reclaims the reservations of processes of host (this one) that
// are gone and those past their until time (another host's dead process is
// only known by that), settling each at its estimate, and reports how many
// it reclaimed. Reserve and Settle do it on their own; pg-monitor does it
// before it reports.
func Expire(ctx context.Context, t store.Team, host proc.Host, now time.Time) (int, error) {
	l := &Ledger{Team: t, Host: host}
	n := 0
	_, err := t.Budget().Update(ctx, func(tb *protocol.TeamBudget) (*protocol.TeamBudget, error) {
		n = 0
		if tb == nil {
			return nil, nil
		}
		if n = l.expire(tb, now); n == 0 {
			return nil, nil
		}
		stamp(tb, now)
		return tb, nil
	})
	return n, err
}

// expire reclaims dead and expired reservations from tb, each settled at
// its estimate (a call whose worker was killed mid-call was paid for all
// the same).
func (l *Ledger) expire(tb *protocol.TeamBudget, now time.Time) int {
	kept := tb.Reservations[:0]
	n := 0
	for _, r := range tb.Reservations {
		gone := l.Host.Owns(r.Host, r.HostID) && proc.ValidStart(r.PIDStart) && !proc.Matches(r.PID, r.PIDStart)
		if gone || !now.Before(r.Until) {
			n++
			tb.SpentUSD += r.USD
			tb.Calls++
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

// stamp sets what every ledger document carries.
func stamp(tb *protocol.TeamBudget, now time.Time) {
	tb.Type, tb.Version, tb.UpdatedAt = "team_budget", 1, now.UTC()
	if tb.Reservations == nil {
		tb.Reservations = []protocol.Reservation{}
	}
}
