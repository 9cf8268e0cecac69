package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// A host whose clock lags ten minutes writes its worker's record: readers
// on other hosts (one with the right time, one whose clock runs five
// minutes ahead) see its heartbeat as just now by their own clocks, not as
// ten or fifteen minutes old, so a live worker does not look stale; the
// writing host reads back what it wrote; the heartbeat_at column is in the
// server's clock. A heartbeat that is truly old stays old.
func TestWorkerTimesInTheReadersClock(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DB(t)
	host := func(off time.Duration) *pgstore.Store {
		s, err := pgstore.OpenStore(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		pgstore.SetClock(s, func() time.Time { return time.Now().Add(off) })
		return s
	}
	lagging, right, ahead := host(-10*time.Minute), host(0), host(5*time.Minute)
	now := time.Now().Add(-10 * time.Minute).UTC() // the lagging host's time
	tm, _ := lagging.Team("t")
	since := now.Add(-time.Second)
	rec := &protocol.Worker{Worker: "1", Host: "slow", State: "executing", HeartbeatAt: now, ProgressAt: now, StartedAt: now.Add(-time.Hour),
		Approval: &protocol.PendingApproval{Call: "c1", Tool: "bash", Since: since}}
	if err := tm.Workers().Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	old := now.Add(-time.Hour) // a worker that stopped beating an hour ago
	if _, err := tm.Workers().Update(ctx, "2", func(*protocol.Worker) (*protocol.Worker, error) {
		return &protocol.Worker{Worker: "2", Host: "slow", State: "executing", HeartbeatAt: old}, nil
	}); err != nil {
		t.Fatal(err)
	}

	near := func(what string, got, want time.Time) {
		t.Helper()
		if d := got.Sub(want); d < -2*time.Second || d > 2*time.Second {
			t.Errorf("%s: %s, want about %s (off by %s)", what, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano), d)
		}
	}
	for _, r := range []struct {
		name string
		s    *pgstore.Store
		off  time.Duration
	}{{"the writer", lagging, -10 * time.Minute}, {"a reader with the right time", right, 0}, {"a reader ahead", ahead, 5 * time.Minute}} {
		tm, _ := r.s.Team("t")
		got, err := tm.Workers().Read(ctx, "1")
		if err != nil {
			t.Fatal(err)
		}
		its := time.Now().Add(r.off)
		near(r.name+": heartbeat_at", got.HeartbeatAt, its)
		near(r.name+": progress_at", got.ProgressAt, its)
		near(r.name+": started_at", got.StartedAt, its.Add(-time.Hour))
		near(r.name+": approval.since", got.Approval.Since, its.Add(-time.Second))
		if r.s == lagging && (!got.HeartbeatAt.Equal(now) || !got.Approval.Since.Equal(since)) {
			t.Errorf("the writer reads back %s, %s; it wrote %s, %s", got.HeartbeatAt, got.Approval.Since, now, since)
		}
		list, errs := tm.Workers().List(ctx)
		if len(errs) > 0 || len(list) != 2 {
			t.Fatalf("list: %v %v", list, errs)
		}
		near(r.name+": listed heartbeat_at", list[0].HeartbeatAt, its)
		near(r.name+": the old heartbeat", list[1].HeartbeatAt, its.Add(-time.Hour))
		// An update from this host keeps the other times as they were,
		// in its clock.
		up, err := tm.Workers().Update(ctx, "2", func(old *protocol.Worker) (*protocol.Worker, error) {
			near(r.name+": the old heartbeat, to update", old.HeartbeatAt, its.Add(-time.Hour))
			return old, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		near(r.name+": the old heartbeat, updated", up.HeartbeatAt, its.Add(-time.Hour))
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var age time.Duration
	if err := conn.QueryRow(ctx, `SELECT now() - heartbeat_at FROM workers WHERE team = 't' AND worker = '1'`).Scan(&age); err != nil {
		t.Fatal(err)
	}
	if age < -2*time.Second || age > 2*time.Second {
		t.Errorf("now() - heartbeat_at is %s in the server's clock, want about 0", age)
	}
}

// BenchmarkWorkerRecords: what a worker record costs on PostgreSQL, the
// heartbeat (an Update, as pg-loop and pg-monitor beat write it) and the
// listing of a team of 64 workers (pg-monitor's pass, pg-dash's refresh),
// with the clocks measured at each (clock.go).
//
//	go test ./pkg/store/pgstore -run '^$' -bench WorkerRecords -benchtime 2000x
func BenchmarkWorkerRecords(b *testing.B) {
	ctx := context.Background()
	s, err := pgstore.OpenStore(ctx, pgtest.DB(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tm, _ := s.Team("t")
	for i := range 64 {
		now := time.Now()
		if err := tm.Workers().Write(ctx, &protocol.Worker{Worker: fmt.Sprint(i + 1), Host: "box", State: "executing",
			HeartbeatAt: now, ProgressAt: now, StartedAt: now, Velocity: 1}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("beat", func(b *testing.B) {
		for b.Loop() {
			if _, err := tm.Workers().Update(ctx, "1", func(w *protocol.Worker) (*protocol.Worker, error) {
				w.HeartbeatAt = time.Now()
				return w, nil
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("list64", func(b *testing.B) {
		for b.Loop() {
			if recs, errs := tm.Workers().List(ctx); len(recs) != 64 || len(errs) > 0 {
				b.Fatal(len(recs), errs)
			}
		}
	})
}
