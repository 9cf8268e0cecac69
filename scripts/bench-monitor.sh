#!/usr/bin/env bash
# pg-monitor benchmarks:
#   - one watch pass over 256 worker records (Go benchmark, and `watch --once`
#     end to end, process start included);
#   - the RSS of `pg-monitor run` supervising 16 beating workers.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/bin/pg-monitor" ./cmd/pg-monitor
export PATH="$tmp/bin:$PATH" POWERGLIDE_HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/config"

echo "-- Go benchmark: one pass over 256 records (target <= 50 ms)"
go test -run '^$' -bench 'BenchmarkPass$' -benchmem -count 3 ./pkg/monitor | grep Benchmark

# A queue double that has work left and nothing claimed.
cat >"$tmp/bin/q" <<'Q'
#!/bin/sh
case "$3" in
stats) echo '{"pending":1,"claimed":0,"done":0,"failed":0,"cancelled":0,"blocked":0}' ;;
esac
Q
chmod +x "$tmp/bin/q"
export POWERGLIDE_QUEUE_CMD="$tmp/bin/q"

echo "-- watch --once over 256 records, end to end (process start included)"
dir="$POWERGLIDE_HOME/teams/bench"
mkdir -p "$dir"
# The records name a live process that is not an ancestor of pg-monitor
# (one that is, such as this shell, is never acted on and warned about:
# not the steady state measured here).
sleep 600 &
live=$!
start=$(awk '{print $22}' /proc/$live/stat)
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for i in $(seq 1 256); do
	printf '{"worker":"%s","pid":%s,"pid_start":"%s","host":"%s","state":"executing","heartbeat_at":"%s","progress_at":"%s","started_at":"%s","usage":{"cost_usd":0},"velocity":1,"last_error":null}\n' \
		"$i" "$live" "$start" "$(hostname)" "$now" "$now" "$now" >"$dir/worker-$i.json"
done
for _ in 1 2 3; do
	/usr/bin/time -f "watch --once: %e s wall, %M KB max RSS" pg-monitor watch --team bench --once --stale 1h
done

echo "-- RSS of pg-monitor run with 16 workers (target <= 20 MB)"
pg-monitor run --team rss --workers 16 --interval 200ms --stale 10s -- \
	sh -c 'while :; do pg-monitor beat --pid $$; sleep 1; done' 2>/dev/null &
mon=$!
max=0
for _ in $(seq 1 40); do
	sleep 0.25
	rss=$(awk '/^VmRSS/ {print $2}' /proc/$mon/status 2>/dev/null || echo 0)
	[ "${rss:-0}" -gt "$max" ] && max=$rss
done
hwm=$(awk '/^VmHWM/ {print $2}' /proc/$mon/status)
n=$(ls "$POWERGLIDE_HOME/teams/rss"/worker-*.json | wc -l)
kill -TERM $mon
wait $mon || true
echo "pg-monitor run, $n workers, 10 s: max VmRSS sampled ${max} KB, VmHWM ${hwm} KB"
