package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/filestore"
)

var ctx = context.Background()

// fileTeam is team t of the file store under home.
func fileTeam(home string) store.Team {
	tm, err := filestore.Open(home, filestore.Options{}).Team("t")
	if err != nil {
		panic(err)
	}
	return tm
}

// TestMain doubles as a worker process of TestProcessesShareTheBudget.
func TestMain(m *testing.M) {
	if os.Getenv("LEDGER_WORKER") != "" {
		os.Exit(worker())
	}
	os.Exit(m.Run())
}

// worker reserves and settles calls until the budget refuses one; it
// prints how many it made.
func worker() int {
	d := fileTeam(os.Getenv("LEDGER_HOME"))
	est, _ := strconv.ParseFloat(os.Getenv("LEDGER_EST"), 64)
	cost, _ := strconv.ParseFloat(os.Getenv("LEDGER_COST"), 64)
	l := New(d, os.Getenv("LEDGER_WORKER"), proc.ThisHost())
	calls := 0
	for {
		id, err := l.Reserve(ctx, est)
		var busy *BusyError
		var out *ExhaustedError
		switch {
		case errors.As(err, &out):
			fmt.Println(calls)
			return 0
		case errors.As(err, &busy):
			time.Sleep(time.Millisecond)
			continue
		case err != nil:
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		time.Sleep(2 * time.Millisecond) // the call
		if err := l.Settle(ctx, id, cost); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		calls++
	}
}

// Worker processes sharing a budget never spend past it when the
// estimates hold, and pass it by at most one call's estimate error per
// worker when they do not.
func TestProcessesShareTheBudget(t *testing.T) {
	for _, tc := range []struct {
		name      string
		est, cost float64
	}{
		{"estimate above the cost", 0.016, 0.01},
		{"estimate below the cost", 0.008, 0.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const workers, budget = 4, 0.15
			home := t.TempDir()
			d := fileTeam(home)
			if _, err := SetBudget(ctx, d, budget, time.Now()); err != nil {
				t.Fatal(err)
			}
			cmds := make([]*exec.Cmd, workers)
			outs := make([][]byte, workers)
			errs := make(chan error, workers)
			for i := range cmds {
				cmds[i] = exec.Command(os.Args[0])
				cmds[i].Env = append(os.Environ(), "LEDGER_WORKER="+strconv.Itoa(i+1), "LEDGER_HOME="+home,
					fmt.Sprintf("LEDGER_EST=%g", tc.est), fmt.Sprintf("LEDGER_COST=%g", tc.cost))
				cmds[i].Stderr = os.Stderr
				go func(i int) {
					var err error
					outs[i], err = cmds[i].Output()
					errs <- err
				}(i)
			}
			for range cmds {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			calls := 0
			for _, o := range outs {
				n, err := strconv.Atoi(string(o[:len(o)-1]))
				if err != nil {
					t.Fatalf("worker output %q", o)
				}
				calls += n
			}
			tb, err := Read(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if tb.Calls != calls || math.Abs(tb.SpentUSD-float64(calls)*tc.cost) > 1e-9 {
				t.Fatalf("ledger: %d calls, $%g spent; the workers made %d calls at $%g", tb.Calls, tb.SpentUSD, calls, tc.cost)
			}
			bound := budget
			if tc.cost > tc.est {
				bound += workers * (tc.cost - tc.est)
			}
			if tb.SpentUSD > bound+1e-9 {
				t.Fatalf("spent $%g, past $%g", tb.SpentUSD, bound)
			}
			if tb.SpentUSD+tc.est <= budget {
				t.Fatalf("spent $%g: the workers stopped while a call of $%g still fit $%g", tb.SpentUSD, tc.est, budget)
			}
			if len(tb.Reservations) != 0 || tb.ReservedUSD != 0 || tb.Refused == nil {
				t.Fatalf("after the run: %+v", tb)
			}
			t.Logf("%d workers: %d calls, $%.4f spent of $%.2f", workers, calls, tb.SpentUSD, budget)
		})
	}
}

// A call that fits only once other calls settle is told to wait (Busy);
// one that cannot fit is refused and the refusal recorded.
func TestReserveBusyAndExhausted(t *testing.T) {
	home := t.TempDir()
	d := fileTeam(home)
	if _, err := SetBudget(ctx, d, 0.1, time.Now()); err != nil {
		t.Fatal(err)
	}
	a, b := New(d, "1", proc.ThisHost()), New(d, "2", proc.ThisHost())
	ida, err := a.Reserve(ctx, 0.06)
	if err != nil || ida == "" {
		t.Fatalf("first reservation: %q %v", ida, err)
	}
	var busy *BusyError
	if _, err := b.Reserve(ctx, 0.06); !errors.As(err, &busy) {
		t.Fatalf("second reservation: %v, want busy", err)
	}
	if err := a.Settle(ctx, ida, 0.05); err != nil {
		t.Fatal(err)
	}
	var out *ExhaustedError
	if _, err := b.Reserve(ctx, 0.06); !errors.As(err, &out) {
		t.Fatalf("after $0.05 spent: %v, want exhausted", err)
	}
	tb, _ := Read(ctx, d)
	if tb.Refused == nil || tb.Refused.Worker != "2" || tb.SpentUSD != 0.05 || len(tb.Reservations) != 0 {
		t.Fatalf("ledger: %+v", tb)
	}
	idb, err := b.Reserve(ctx, 0.05)
	if err != nil {
		t.Fatalf("a call that fits exactly: %v", err)
	}
	if err := b.Settle(ctx, idb, 0.05); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(ctx, 0); !errors.As(err, &out) {
		t.Fatalf("a call without an estimate once the budget is spent: %v, want exhausted", err)
	}
	// A new budget clears the refusal; 0 removes the limit.
	if tb, err := SetBudget(ctx, d, 0, time.Now()); err != nil || tb.Refused != nil {
		t.Fatalf("budget 0: %+v %v", tb, err)
	}
	if _, err := b.Reserve(ctx, 100); err != nil {
		t.Fatalf("no budget: %v", err)
	}
}

// A team without a ledger reserves nothing; SetBudget seeds spent from the
// worker records, so earlier runs count.
func TestNoLedgerAndSeed(t *testing.T) {
	home := t.TempDir()
	d := fileTeam(home)
	if id, err := New(d, "1", proc.ThisHost()).Reserve(ctx, 5); id != "" || err != nil {
		t.Fatalf("without a ledger: %q %v", id, err)
	}
	if _, err := d.Budget().Read(ctx); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a reservation made the ledger")
	}
	if err := d.Workers().Write(ctx, &protocol.Worker{Worker: "1", Usage: protocol.Usage{CostUSD: 0.25}, Spent: &protocol.Usage{CostUSD: 0.5}}); err != nil {
		t.Fatal(err)
	}
	tb, err := SetBudget(ctx, d, 1, time.Now())
	if err != nil || tb.SpentUSD != 0.75 {
		t.Fatalf("seeded ledger: %+v %v", tb, err)
	}
	if _, err := SetBudget(ctx, d, -1, time.Now()); err == nil {
		t.Fatal("a negative budget was taken")
	}
}

// The reservation of a worker that died is reclaimed at the next change;
// one that outlives its TTL too (another host's, which cannot be checked).
// A reclaimed reservation is settled at its estimate: the call it stood for
// was made (kill -9 mid-call) and its cost must not be lost.
func TestDeadAndExpiredReservations(t *testing.T) {
	home := t.TempDir()
	d := fileTeam(home)
	if _, err := SetBudget(ctx, d, 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	// A process that has ended: its pid and start time no longer match.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	dead := New(d, "1", proc.ThisHost())
	dead.PID, dead.PIDStart = cmd.Process.Pid, "1"
	if _, err := dead.Reserve(ctx, 0.09); err != nil {
		t.Fatal(err)
	}
	other := New(d, "2", proc.ThisHost())
	other.Host, other.TTL = proc.Host{Name: "elsewhere"}, time.Minute
	other.Now = func() time.Time { return now }
	if _, err := other.Reserve(ctx, 0.05); err != nil {
		t.Fatal(err)
	}
	live := New(d, "3", proc.ThisHost())
	live.Now = func() time.Time { return now }
	// 0.09 settled + 0.05 reserved + 0.86 fits; 0.87 would not
	if _, err := live.Reserve(ctx, 0.87); err == nil {
		t.Fatal("the dead worker's call was not settled")
	}
	if _, err := live.Reserve(ctx, 0.86); err != nil {
		t.Fatalf("the dead worker's reservation still holds the budget: %v", err)
	}
	tb, _ := Read(ctx, d)
	if len(tb.Reservations) != 2 || math.Abs(tb.ReservedUSD-0.91) > 1e-9 || math.Abs(tb.SpentUSD-0.09) > 1e-9 || tb.Calls != 1 {
		t.Fatalf("ledger: %+v", tb)
	}
	if n, err := Expire(ctx, d, proc.ThisHost(), now.Add(2*time.Minute)); err != nil || n != 1 {
		t.Fatalf("expire after the TTL: %d %v", n, err)
	}
	tb, _ = Read(ctx, d)
	if len(tb.Reservations) != 1 || tb.Reservations[0].Worker != "3" || math.Abs(tb.SpentUSD-0.14) > 1e-9 || tb.Calls != 2 {
		t.Fatalf("ledger after the TTL: %+v", tb)
	}
}

// A reservation of a host that shares this one's name but not its id
// (another machine, another pid namespace) is not dropped for a pid that
// is gone here: only its until time ends it.
func TestReservationOfAnotherHostOfTheSameName(t *testing.T) {
	ctx := context.Background()
	d := fileTeam(t.TempDir())
	if _, err := SetBudget(ctx, d, 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	twin := New(d, "1", proc.ThisHost())
	twin.PID, twin.PIDStart, twin.TTL = cmd.Process.Pid, "1", time.Minute
	twin.Host.ID = proc.HostID("another boot", "pid:[4026531836]")
	if _, err := twin.Reserve(ctx, 0.5); err != nil {
		t.Fatal(err)
	}
	if n, err := Expire(ctx, d, proc.ThisHost(), time.Now()); err != nil || n != 0 {
		t.Fatalf("expire dropped %d reservations (%v), want none", n, err)
	}
	if n, err := Expire(ctx, d, proc.ThisHost(), time.Now().Add(2*time.Minute)); err != nil || n != 1 {
		t.Fatalf("expire after the TTL: %d %v", n, err)
	}
}

// On a store several hosts share, a reservation without host_id (an older
// writer's, a host's that cannot read its id, a hand edit) is no host's:
// not dropped for a pid that is gone here, even when it names this host
// or none; a malformed pid_start is not gone either. On the team
// directory (one host's) the name still decides (hostile review F6).
func TestReservationWithoutHostID(t *testing.T) {
	ctx := context.Background()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	this := proc.ThisHost()
	shared := this
	shared.Shared = true
	for _, tc := range []struct {
		what        string
		host        proc.Host // the reservation's
		start       string
		reader      proc.Host
		wantDropped int
	}{
		{"this host's name, shared store", proc.Host{Name: this.Name}, "1", shared, 0},
		{"no host, shared store", proc.Host{}, "1", shared, 0},
		{"this host's id, shared store", this, "1", shared, 1},
		{"malformed pid_start", this, "01", this, 0},
		{"this host's name, team directory", proc.Host{Name: this.Name}, "1", this, 1},
		{"no host, team directory", proc.Host{}, "1", this, 1},
	} {
		d := fileTeam(t.TempDir())
		if _, err := SetBudget(ctx, d, 1, time.Now()); err != nil {
			t.Fatal(err)
		}
		l := New(d, "1", tc.host)
		l.PID, l.PIDStart = cmd.Process.Pid, tc.start
		if _, err := l.Reserve(ctx, 0.5); err != nil {
			t.Fatal(err)
		}
		if n, err := Expire(ctx, d, tc.reader, time.Now()); err != nil || n != tc.wantDropped {
			t.Errorf("%s: expire dropped %d (%v), want %d", tc.what, n, err, tc.wantDropped)
		}
	}
}

// BenchmarkReserveSettle is the ledger's cost per model call: a
// reservation and a settlement, each a locked read and an fsynced atomic
// replace of budget.json, with n other calls in flight.
func BenchmarkReserveSettle(b *testing.B) {
	for _, n := range []int{0, 16} {
		b.Run(fmt.Sprintf("inflight=%d", n), func(b *testing.B) {
			home := b.TempDir()
			d := fileTeam(home)
			if _, err := SetBudget(ctx, d, 1e9, time.Now()); err != nil {
				b.Fatal(err)
			}
			l := New(d, "1", proc.ThisHost())
			for range n {
				if _, err := l.Reserve(ctx, 0.01); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				id, err := l.Reserve(ctx, 0.01)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Settle(ctx, id, 0.005); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
