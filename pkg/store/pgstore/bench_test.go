package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// BenchmarkClaimComplete32: 32 workers in one process share one store
// (one pool of 32 connections) and claim and complete as fast as they
// can, on a server with fsync on. It reports claim+complete cycles per
// second (cycles/s), with the server's default synchronous commit
// (commit=sync) and with synchronous_commit off for the database
// (commit=async: a crash of the server may lose the last moments of
// changes, never their order), which docs/postgres.md describes.
//
//	go test ./pkg/store/pgstore -run '^$' -bench ClaimComplete32 -benchtime 3000x
func BenchmarkClaimComplete32(b *testing.B) {
	srv := pgtest.Start(b, pgtest.Options{Durable: true})
	for _, commit := range []string{"sync", "async"} {
		b.Run("commit="+commit, func(b *testing.B) {
			u := srv.DB(b)
			if commit == "async" {
				setAsync(b, u)
			}
			benchCycles(b, srv, u, 32)
		})
	}
}

func setAsync(b *testing.B, dbURL string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	pu, _ := url.Parse(dbURL)
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+strings.TrimPrefix(pu.Path, "/")+" SET synchronous_commit = off"); err != nil {
		b.Fatal(err)
	}
}

// benchCycles runs b.N claim+complete cycles with workers goroutines on
// one store and reports, besides cycles/s, figures that depend less on
// what else the machine runs: the CPU time of the client and of the
// server per cycle, and the round trips per cycle (messages the client
// sent between answers).
func benchCycles(b *testing.B, srv *pgtest.Server, dbURL string, workers int) {
	ctx := context.Background()
	var trips atomic.Int64
	s, err := pgstore.OpenCounting(ctx, dbURL+fmt.Sprintf("&pool_max_conns=%d", workers), &trips)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tm, _ := s.Team("bench")
	q := tm.Tasks()
	in := make([]protocol.Task, b.N)
	for i := range in {
		in[i] = protocol.Task{ID: fmt.Sprintf("b%07d", i), Title: "bench task", Prompt: "do it"}
	}
	for len(in) > 0 {
		n := min(len(in), 10000)
		if _, err := q.Add(in[:n]); err != nil {
			b.Fatal(err)
		}
		in = in[n:]
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	srvCPU0, cliCPU0 := srv.CPU(), clientCPU()
	trips.Store(0)
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			name := fmt.Sprintf("w%d", w)
			for {
				t, err := q.Claim(name, time.Minute)
				if errors.Is(err, queue.ErrNothing) {
					return
				}
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := q.Complete(t.ID, t.Claim.Token, nil); err != nil {
					b.Error(err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	srvCPU, cliCPU := srv.CPU()-srvCPU0, clientCPU()-cliCPU0
	if int(done.Load()) != b.N {
		b.Fatalf("%d cycles, want %d", done.Load(), b.N)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "cycles/s")
	b.ReportMetric(float64(srvCPU.Microseconds())/float64(b.N), "server-cpu-us/cycle")
	b.ReportMetric(float64(cliCPU.Microseconds())/float64(b.N), "client-cpu-us/cycle")
	b.ReportMetric(float64(trips.Load())/float64(b.N), "trips/cycle")
}

// clientCPU is the CPU time (user and system) of this process so far.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClaimCompleteLive: one worker's claim+complete with 1k, 10k and
// 100k live tasks waiting (fsync on): a claim must not slow down as the
// queue grows.
//
//	go test ./pkg/store/pgstore -run '^$' -bench ClaimCompleteLive -benchtime 300x
func BenchmarkClaimCompleteLive(b *testing.B) {
	srv := pgtest.Start(b, pgtest.Options{Durable: true})
	for _, live := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("live=%d", live), func(b *testing.B) {
			ctx := context.Background()
			s, err := pgstore.OpenStore(ctx, srv.DB(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			tm, _ := s.Team("bench")
			q := tm.Tasks()
			total := live + b.N
			for i := 0; i < total; i += 10000 {
				var in []protocol.Task
				for j := i; j < min(total, i+10000); j++ {
					in = append(in, protocol.Task{ID: fmt.Sprintf("b%07d", j), Title: "bench task"})
				}
				if _, err := q.Add(in); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				t, err := q.Claim("w", time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := q.Complete(t.ID, t.Claim.Token, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
