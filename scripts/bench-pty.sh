#!/usr/bin/env bash
# pg-pty benchmarks (run by `make bench` after `make build`):
#   1. throughput: `pg-pty run -- cat FILE` against `script -qc 'cat FILE'`
#      on a 100 MB file, both writing to /dev/null (best of N runs each);
#   2. start latency: wall time of `pg-pty start NAME -- sleep` until the
#      program runs (median of N);
#   3. holder RSS: VmRSS of an idle holder, and after 10 MB of output.
# Environment: BENCH_MB (default 100), BENCH_RUNS (default 3), BENCH_STARTS (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PG_PTY:-bin/pg-pty}
[ -x "$bin" ] || go build -o "$bin" ./cmd/pg-pty
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
mb=${BENCH_MB:-100}
runs=${BENCH_RUNS:-3}
starts=${BENCH_STARTS:-20}
tmp=$(mktemp -d)
export POWERGLIDE_HOME=$tmp/home
trap '"$bin" clean --force >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

now() { date +%s%N; }
best() { sort -n | head -1; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Text lines, as a terminal carries them (the line discipline turns \n into \r\n).
(set +o pipefail; head -c $((mb * 1024 * 1024 * 3 / 4)) /dev/urandom | base64 -w 76 | head -c $((mb * 1024 * 1024)) > "$tmp/data")
bytes=$(stat -c %s "$tmp/data")

# Interleaved runs, best of each: other load on the machine hits both alike.
# Wall time, and CPU time (user+sys of the whole process tree), which load
# disturbs less.
: > "$tmp/pg"; : > "$tmp/sc"
for _ in $(seq "$runs"); do
	/usr/bin/time -a -o "$tmp/pg" -f "%e %U %S" "$bin" run -- cat "$tmp/data" </dev/null >/dev/null
	/usr/bin/time -a -o "$tmp/sc" -f "%e %U %S" script -qc "cat $tmp/data" /dev/null </dev/null >/dev/null
done
read -r pg_wall pg_cpu < <(awk '{w=$1; c=$2+$3; if (NR==1 || w<bw) bw=w; if (NR==1 || c<bc) bc=c} END {print bw, bc}' "$tmp/pg")
read -r sc_wall sc_cpu < <(awk '{w=$1; c=$2+$3; if (NR==1 || w<bw) bw=w; if (NR==1 || c<bc) bc=c} END {print bw, bc}' "$tmp/sc")
awk -v b="$bytes" -v pw="$pg_wall" -v pc="$pg_cpu" -v sw="$sc_wall" -v sc="$sc_cpu" -v n="$runs" 'BEGIN {
	mb = b / 1048576
	printf "throughput (%d MB, best of %d)  pg-pty run: %.0f MB/s (%.2f s wall, %.2f s cpu)   script -qc: %.0f MB/s (%.2f s wall, %.2f s cpu)\n", mb, n, mb / pw, pw, pc, mb / sw, sw, sc
	printf "throughput ratio pg-pty/script: %.2f by wall time, %.2f by cpu time (target >= 1.0)\n", sw / pw, sc / pc }'

lat=$(for i in $(seq "$starts"); do
	t0=$(now); "$bin" start "lat$i" -- sleep 300 >/dev/null; t1=$(now); echo $((t1 - t0))
done | median)
rss_idle=$(grep VmRSS "/proc/$("$bin" status lat1 --json | sed 's/.*"holder_pid":\([0-9]*\).*/\1/')/status" | awk '{print $2}')
"$bin" clean --force >/dev/null
"$bin" start busy -- sh -c "head -c 10485760 $tmp/data; sleep 300" >/dev/null
hp=$("$bin" status busy --json | sed 's/.*"holder_pid":\([0-9]*\).*/\1/')
for _ in $(seq 600); do
	[ "$(stat -c %s "$POWERGLIDE_HOME/pty/busy/output.log")" -ge 10485760 ] && break
	sleep 0.1
done
rss_busy=$(grep VmRSS "/proc/$hp/status" | awk '{print $2}')
# Baselines under the same load: one process start, and one Go binary start.
true_ns=$(for _ in $(seq "$starts"); do t0=$(now); /bin/true; t1=$(now); echo $((t1 - t0)); done | median)
ver_ns=$(for _ in $(seq "$starts"); do t0=$(now); "$bin" --version >/dev/null; t1=$(now); echo $((t1 - t0)); done | median)
awk -v l="$lat" -v n="$starts" -v t="$true_ns" -v v="$ver_ns" 'BEGIN {
	printf "start latency (median of %d, pg-pty start until the program runs): %.1f ms (target <= 10 ms)\n", n, l / 1e6
	printf "  baselines on this machine now: /bin/true %.1f ms, pg-pty --version %.1f ms; start = %.1f x pg-pty --version\n", t / 1e6, v / 1e6, l / v }'
printf "  load average: %s\n" "$(cut -d' ' -f1-3 /proc/loadavg)"
awk -v i="$rss_idle" -v b="$rss_busy" 'BEGIN { printf "holder RSS: idle %.1f MB, after 10 MB of output %.1f MB (target <= 15 MB)\n", i / 1024, b / 1024 }'
