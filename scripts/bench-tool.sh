#!/usr/bin/env bash
# pg-tool benchmarks: a cold `pg-tool call read`, serve-mode cost per read
# call, a bash call with and without the sandbox, and grep over a large tree
# against ripgrep. Prints a small report.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
[ -x "$BIN/pg-tool" ] || go build -trimpath -o "$BIN/pg-tool" ./cmd/pg-tool
T=$(readlink -f "$BIN/pg-tool")
if ! command -v rg >/dev/null 2>&1; then
	echo "bench-tool: installing ripgrep (Debian) for the comparison" >&2
	(apt-get install -y ripgrep >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y ripgrep >/dev/null 2>&1; }) ||
		echo "bench-tool: ripgrep could not be installed; the grep comparison is skipped" >&2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
seq 1 200 | sed 's/^/line of a typical source file /' > "$work/file.go"

ms() { # ms START_NS END_NS COUNT -> mean milliseconds
	awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.2f", (b - a) / n / 1e6 }'
}

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# loop N CMD...: run CMD N times; prints "wall_ms cpu_ms" per run (cpu = user+sys of the children).
loop() {
	local n=$1
	shift
	local t0 c0 t1 c1 me=$BASHPID
	t0=$(date +%s%N)
	c0=$(awk '{print $16 + $17}' /proc/$me/stat)
	for ((i = 0; i < n; i++)); do "$@" >/dev/null; done
	t1=$(date +%s%N)
	c1=$(awk '{print $16 + $17}' /proc/$me/stat)
	awk -v a="$t0" -v b="$t1" -v c="$c0" -v d="$c1" -v n="$n" -v hz="$(getconf CLK_TCK)" \
		'BEGIN { printf "%.2f ms wall, %.2f ms cpu", (b - a) / n / 1e6, (d - c) * 1000 / hz / n }'
}

# pstat N CMD...: mean wall and cpu (task-clock) of N runs, with perf when
# it is there (exact), else from the shell's child times.
pstat() {
	local n=$1
	shift
	if command -v perf >/dev/null 2>&1 && perf stat -x, -r 1 true >/dev/null 2>&1; then
		perf stat -x, -r "$n" "$@" 2>&1 >/dev/null | awk -F, -v n="$n" '
			$3 == "task-clock" { cpu = $1 }
			END { printf "%.2f ms cpu (perf task-clock)", cpu }'
		printf ", %s" "$(loop "$n" "$@" | cut -d, -f1)"
	else
		loop "$n" "$@"
	fi
}

# 1. Cold call: a new process per call, reading a 200-line file.
n=200
"$T" --root "$work" call read '{"path":"file.go"}' >/dev/null # warm the page cache
echo "cold pg-tool call read (200-line file): $(pstat $n "$T" --root "$work" call read '{"path":"file.go"}') per call (mean of $n)"
echo "  pg-tool --version (process start only): $(pstat $n "$T" --version)"
echo "  baseline, fork+exec of /bin/true:      $(pstat $n /bin/true)"

# 2. Serve mode: 20000 read calls through one process, end to end.
n=20000
for ((i = 0; i < n; i++)); do echo '{"id":"1","name":"read","input":{"path":"file.go"}}'; done > "$work/calls.jsonl"
for ((i = 0; i < n; i++)); do echo '{"id":"1","name":"ls","input":{}}'; done > "$work/ls.jsonl"
start=$(date +%s%N)
"$T" --root "$work" serve < "$work/calls.jsonl" > /dev/null
end=$(date +%s%N)
echo "serve: read calls: $(ms "$start" "$end" $n) ms per call (mean of $n, including the read itself)"
start=$(date +%s%N)
"$T" --root "$work" serve < "$work/ls.jsonl" > /dev/null
end=$(date +%s%N)
echo "serve: ls calls: $(ms "$start" "$end" $n) ms per call (mean of $n)"

# 3. bash "true" through serve, with and without the sandbox: what the
#    sandbox adds to a command (the issue's bound: 1 ms median).
n=1000
for ((i = 0; i < n; i++)); do echo '{"id":"1","name":"bash","input":{"command":"true"}}'; done > "$work/bash.jsonl"
mean_bash() { # mean_bash MODE: mean time of a bash call through serve
	"$T" --root "$work" --sandbox "$1" serve < "$work/bash.jsonl" > "$work/bash.out"
	start=$(date +%s%N)
	"$T" --root "$work" --sandbox "$1" serve < "$work/bash.jsonl" > "$work/bash.out"
	end=$(date +%s%N)
	echo "$(ms "$start" "$end" $n) ms per call end to end (mean of $n)"
}
for mode in off workspace-write; do
	echo "serve: bash true, --sandbox $(printf '%-15s' "$mode"): $(mean_bash "$mode")"
done
echo "  baseline, fork+exec of bash -c true:   $(pstat 200 bash -c true)"

# 4. grep over a large tree (the Go source tree) against ripgrep.
if command -v rg >/dev/null 2>&1; then
	src=$(go env GOROOT)/src
	files=$(find "$src" -type f | wc -l)
	size=$(du -sh "$src" | cut -f1)
	cpu() { # cpu CMD...: task-clock ms of one run (perf), or "-"
		if command -v perf >/dev/null 2>&1; then
			perf stat -x, "$@" 2>&1 >/dev/null | awk -F, '$3 == "task-clock" { printf "%.0f", $1 }'
		else
			echo -
		fi
	}
	run() { # run NAME CMD...: best of 3, ms
		local best=""
		for _ in 1 2 3; do
			local s e
			s=$(date +%s%N)
			"$@" >/dev/null 2>&1 || true
			e=$(date +%s%N)
			local t=$(((e - s) / 1000000))
			if [ -z "$best" ] || [ "$t" -lt "$best" ]; then best=$t; fi
		done
		echo "$best"
	}
	echo "grep over $src ($files files, $size), best of 3:"
	for pat in 'func NewReader' 'func \w+Reader\(' '(?i)deadline exceeded'; do
		input=$(printf '{"pattern":"%s","max_results":5000}' "${pat//\\/\\\\}")
		pg=$(run "$T" --root "$src" --max-output=-1 call grep "$input")
		rgt=$(run rg --no-heading -n -m 5000 --no-ignore-vcs --hidden -e "$pat" "$src")
		ratio=$(awk -v a="$pg" -v b="$rgt" 'BEGIN { if (b < 1) b = 1; printf "%.1f", a / b }')
		pgc=$(cpu "$T" --root "$src" --max-output=-1 call grep "$input")
		rgc=$(cpu rg --no-heading -n -m 5000 --no-ignore-vcs --hidden -e "$pat" "$src")
		# Same matches? Count lines both found.
		pgn=$("$T" --root "$src" --max-output=-1 call grep "$(printf '{"pattern":"%s","output_mode":"count","max_results":5000}' "${pat//\\/\\\\}")" | jq -r .output | awk -F: '{s+=$NF} END {print s+0}')
		rgn=$(rg -c --no-ignore-vcs --hidden -e "$pat" "$src" | awk -F: '{s+=$NF} END {print s+0}')
		echo "  $(printf '%-24s' "$pat") wall: pg-tool ${pg} ms, rg ${rgt} ms, ratio ${ratio}x; cpu: pg-tool ${pgc} ms, rg ${rgc} ms (matching lines: pg-tool $pgn, rg $rgn)"
	done
fi
