#!/usr/bin/env bash
# pg-dash benchmarks: the Go benchmarks of pkg/dash (frame time), then the
# CPU a running pg-dash uses in a 160x48 tmux terminal, read from
# /proc/<pid>/stat (utime+stime) over a window of DUR seconds:
#   idle   a 64-worker team that does not change
#   flood  1,000 loop events a second into the shown worker's log, and all
#          64 heartbeats rewritten every second
#   spread 1,000 loop events a second over the 64 workers' logs, same beats
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-10}
command -v tmux >/dev/null || { echo "bench-dash: tmux is needed" >&2; exit 1; }

echo "== go test -bench pkg/dash"
(cd pkg && go test -run '^$' -bench . -benchmem -count 1 ./dash/)

tmp=$(mktemp -d)
sock="pgdash-bench-$$"
cleanup() { tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
bin=bin/pg-dash
if [ ! -x "$bin" ]; then
	go build -o "$tmp/pg-dash" ./cmd/pg-dash
	bin="$tmp/pg-dash"
fi
(cd pkg && go build -o "$tmp/benchfeed" ./dash/internal/benchfeed)
"$tmp/benchfeed" team "$tmp/home" bench 64

tmux -L "$sock" new-session -d -s bench -x 160 -y 48 \
	"exec env POWERGLIDE_HOME=$tmp/home TERM=xterm-256color $bin --team bench --view worker --worker 1"
pid=$(tmux -L "$sock" display -p -t bench '#{pane_pid}')
tck=$(getconf CLK_TCK)

cpu_ticks() { awk '{ s = $0; sub(/.*\) /, "", s); split(s, f, " "); print f[12] + f[13] }' "/proc/$pid/stat"; }

measure() { # name
	local t0 t1 w0 w1
	t0=$(cpu_ticks); w0=$(date +%s.%N)
	sleep "$DUR"
	t1=$(cpu_ticks); w1=$(date +%s.%N)
	awk -v n="$1" -v a="$t0" -v b="$t1" -v x="$w0" -v y="$w1" -v hz="$tck" \
		'BEGIN { printf "pg-dash cpu %-7s %6.2f%% of one core (%d ticks in %.1fs)\n", n, 100 * (b - a) / hz / (y - x), b - a, y - x }'
}

sleep 2 # let it load and settle
tmux -L "$sock" capture-pane -p -t bench | head -3
measure idle
"$tmp/benchfeed" feed "$tmp/home" bench 64 1000 "$((DUR + 2))s" one &
feeder=$!
sleep 1
measure flood
wait "$feeder"
tmux -L "$sock" capture-pane -p -t bench | head -4
"$tmp/benchfeed" feed "$tmp/home" bench 64 1000 "$((DUR + 2))s" all &
feeder=$!
sleep 1
measure spread
wait "$feeder"
sleep 1
measure idle
