package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// BenchmarkWorkerRecordLoad: the store load of a big team besides its task
// changes (docs/scaling.md), on a server with fsync on:
//
//   - heartbeat: 32 workers rewrite their worker records as fast as they
//     can, each write a commit of its own, as a heartbeat is; it reports
//     writes/s and the server's CPU per write;
//
//   - list1000: one reader lists a team of 1,000 worker records, as a
//     pg-monitor watch pass and a pg-dash refresh do; it reports the
//     server's CPU per list.
//
//     go test ./pkg/store/pgstore -run '^$' -bench WorkerRecordLoad
func BenchmarkWorkerRecordLoad(b *testing.B) {
	srv := pgtest.Start(b, pgtest.Options{Durable: true})
	ctx := context.Background()
	open := func(b *testing.B) *pgstore.Store {
		s, err := pgstore.OpenStore(ctx, srv.DB(b)+"&pool_max_conns=32")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	record := func(i int) *protocol.Worker {
		now := time.Now().UTC()
		return &protocol.Worker{Worker: fmt.Sprintf("h%02d-w%02d", i/20, i%20), PID: 1000 + i, PIDStart: "12345", Host: fmt.Sprintf("host%02d", i/20),
			Epoch: 1, State: "executing", Task: "t-01JD0000000000000000000000", Step: 17, HeartbeatAt: now, ProgressAt: now, StartedAt: now,
			Usage: protocol.Usage{InputTokens: 120000, OutputTokens: 4000, CostUSD: 0.42}, Velocity: 1, LastTool: "bash"}
	}
	b.Run("heartbeat", func(b *testing.B) {
		tm, _ := open(b).Team("bench")
		ws := tm.Workers()
		var n atomic.Int64
		srv0 := srv.CPU()
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for w := range 32 {
			wg.Go(func() {
				rec := record(w)
				for n.Add(1) <= int64(b.N) {
					rec.HeartbeatAt = time.Now().UTC()
					if err := ws.Write(ctx, rec); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		el := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/el.Seconds(), "writes/s")
		b.ReportMetric(float64((srv.CPU()-srv0).Microseconds())/float64(b.N), "server-cpu-us/write")
	})
	b.Run("list1000", func(b *testing.B) {
		tm, _ := open(b).Team("bench")
		ws := tm.Workers()
		for i := range 1000 {
			if err := ws.Write(ctx, record(i)); err != nil {
				b.Fatal(err)
			}
		}
		srv0 := srv.CPU()
		b.ResetTimer()
		for range b.N {
			recs, errs := ws.List(ctx)
			if len(errs) > 0 || len(recs) != 1000 {
				b.Fatalf("%d records, errors %v", len(recs), errs)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64((srv.CPU()-srv0).Microseconds())/float64(b.N), "server-cpu-us/list")
	})
}
