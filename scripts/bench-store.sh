#!/usr/bin/env bash
# The team store on PostgreSQL next to the team directory (issue 17):
#   1. claim+complete through pg-queue's command line, a fresh process per
#      call (queuebench, as bench-queue.sh runs it): p50 and p99 at 1k, 10k
#      and 100k live tasks, on the team directory (queue_sync on) and on a
#      PostgreSQL server of the benchmark's own on a free local port (pgtest,
#      fsync and synchronous commit on); the tasks are added with one
#      `pg-queue add -` of a JSONL file;
#   2. the two comparisons of the issue: PostgreSQL's p50 over the file
#      store's at 1k (target <= 1.5x), and PostgreSQL's p50 at 100k over its
#      p50 at 1k (target: flat, about 1x), each call connecting itself
#      (store_agent=off) and through the host's store agent (the default:
#      pg-queue agent, started by the first call, whose time is reported
#      apart); and, when pgbouncer is installed,
#      the same cycles through PgBouncer in session mode (a pg-queue process
#      then borrows a warm server connection instead of forking a backend);
#   3. pgstore's in-process benchmark, BenchmarkClaimComplete32: 32
#      goroutine workers claiming and completing over one pool (target
#      >= 1,000 cycles/s), with synchronous commit on and off, and per
#      cycle the server's and the client's CPU time and the round trips,
#      which depend less on what else the machine runs.
# Needs PostgreSQL's server programs (scripts/test-deps.sh installs them).
# Extra arguments go to both queuebench runs, e.g.
#   scripts/bench-store.sh -sizes 1000 -cycles 50
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$tmp/pg-queue" ./cmd/pg-queue
go build -o "$tmp/queuebench" ./pkg/queue/internal/queuebench
qb=("$tmp/queuebench" -bin "$tmp/pg-queue" -sync true -scenarios sizes -cycles 200)

echo "-- claim+complete through the CLI, a fresh pg-queue per call, the team directory (queue_sync on)"
"${qb[@]}" -dir "$tmp/file" "$@" | tee "$tmp/file.out"
echo
echo "-- the same on PostgreSQL (--store postgres://...), each call connecting itself (store_agent=off)"
"${qb[@]}" -dir "$tmp/pg" -postgres "$@" | tee "$tmp/pg.out"
echo
echo "-- the same through the host's store agent (store_agent=auto, the default: pg-queue agent keeps warm connections)"
"${qb[@]}" -dir "$tmp/pga" -postgres -agent "$@" | tee "$tmp/pga.out"
echo
: >"$tmp/pgb.out"
if command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; then
	echo "-- the same through PgBouncer (session mode), as a host of many workers would connect"
	"${qb[@]}" -dir "$tmp/pgb" -postgres -pgbouncer "$@" | tee "$tmp/pgb.out"
else
	echo "-- through PgBouncer: not measured, pgbouncer is not installed (Debian package pgbouncer)"
fi
echo

# p50 SIZE FILE: the p50 (ms) of the "SIZE live tasks" line of a run.
p50() { awk -v s="$1" '$1 == s && $2 == "live" { print $5; exit }' "$2"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "n/a"; else printf "%.2f", a / b }'; }
f1k=$(p50 1000 "$tmp/file.out")
p1k=$(p50 1000 "$tmp/pg.out")
p10k=$(p50 10000 "$tmp/pg.out")
p100k=$(p50 100000 "$tmp/pg.out")
a1k=$(p50 1000 "$tmp/pga.out")
a10k=$(p50 10000 "$tmp/pga.out")
a100k=$(p50 100000 "$tmp/pga.out")
b1k=$(p50 1000 "$tmp/pgb.out")
b100k=$(p50 100000 "$tmp/pgb.out")
echo "postgres vs file at 1000 live tasks: p50 ${p1k:-?} ms vs ${f1k:-?} ms = $(ratio "$p1k" "$f1k")x (each command connecting itself, store_agent=off: a report; the 1.5x target is the default path's, through the agent)"
echo "postgres from 1000 to 100000 live tasks: p50 ${p1k:-?} -> ${p10k:-?} -> ${p100k:-?} ms = $(ratio "$p100k" "$p1k")x (store_agent=off: a report)"
echo "postgres through the store agent vs file at 1000 live tasks: p50 ${a1k:-?} ms vs ${f1k:-?} ms = $(ratio "$a1k" "$f1k")x (target <= 1.5x)"
echo "postgres through the store agent from 1000 to 100000 live tasks: p50 ${a1k:-?} -> ${a10k:-?} -> ${a100k:-?} ms = $(ratio "$a100k" "$a1k")x (target flat)"
echo "postgres through pgbouncer vs file at 1000 live tasks: p50 ${b1k:-?} ms vs ${f1k:-?} ms = $(ratio "$b1k" "$f1k")x; at 100000: ${b100k:-?} ms"
echo

echo "-- in-process: 32 workers claim+complete on one PostgreSQL store (pgstore's BenchmarkClaimComplete32; target >= 1,000 cycles/s)"
go test -run '^$' -bench 'BenchmarkClaimComplete32$' -benchtime 3000x -count 1 ./pkg/store/pgstore | tee "$tmp/go.out" | grep -E '^Benchmark'
awk '/^Benchmark/ {
	name = $1; sub(/^BenchmarkClaimComplete32\//, "", name); sub(/-[0-9]+$/, "", name)
	for (i = 3; i < NF; i++) v[$(i + 1)] = $i
	printf "pgstore in-process, 32 workers, %s: %s cycles/s (target >= 1000); per cycle: %s us server CPU, %s us client CPU, %s round trips\n",
		name, v["cycles/s"], v["server-cpu-us/cycle"], v["client-cpu-us/cycle"], v["trips/cycle"]
}' "$tmp/go.out"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
