#!/usr/bin/env bash
# make bench: runs every tool's benchmarks and writes BENCHMARKS.md.
#
#   1. the Go benchmarks of every package, BENCH_COUNT times each (default 5);
#      the report gives the median of each metric;
#   2. every scripts/bench-<tool>.sh (command-level figures: process start,
#      RSS, throughput against other programs); the report quotes what each
#      printed;
#   3. BENCHMARKS.md: the machine (CPU, cores, memory, kernel, Go, load
#      average at the start and the end), a table of the targets from the
#      tool issues next to the measured figure, the medians, the scripts'
#      output and the exact commands.
#
# Environment: BENCH_COUNT (default 5), BENCH_OUT (default BENCHMARKS.md),
# BENCH_SKIP_GO=1 or BENCH_SKIP_SCRIPTS=1 to leave a part out (the report
# says so), BENCH_NOTE=TEXT adds a note under the machine (e.g. what else
# ran), BENCH_GO_OUTPUT=FILE to report saved `go test -bench` output
# instead of running the Go benchmarks again. Exit status: 0 when every part ran, 1 when one failed (the
# report is still written and names it).
set -euo pipefail
cd "$(dirname "$0")/.."
count=${BENCH_COUNT:-5}
out=${BENCH_OUT:-BENCHMARKS.md}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The arguments each script bench runs with; recorded in the report.
script_args() {
	case "$1" in
	bench-queue.sh) echo "-cycles 150 -duration 8s" ;; # the default 300 cycles at 100k live tasks take many minutes
	*) echo "" ;;
	esac
}

started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
t_start=$(date +%s)
failed=()

gocmd="go test -run '^\$' -bench . -benchmem -count $count github.com/powerglide/powerglide/pkg/..."
: >"$tmp/go.txt"
if [ -n "${BENCH_GO_OUTPUT:-}" ]; then
	cp "$BENCH_GO_OUTPUT" "$tmp/go.txt"
	gocmd="$gocmd  # (output reused from $BENCH_GO_OUTPUT)"
elif [ "${BENCH_SKIP_GO:-}" != 1 ]; then
	echo "== $gocmd" >&2
	if ! go test -run '^$' -bench . -benchmem -count "$count" github.com/powerglide/powerglide/pkg/... 2>&1 | tee "$tmp/go.txt"; then
		failed+=("go test -bench")
	fi
fi

scripts=()
if [ "${BENCH_SKIP_SCRIPTS:-}" != 1 ]; then
	for b in scripts/bench-*.sh; do
		[ -e "$b" ] || continue
		name=$(basename "$b")
		scripts+=("$name")
		args=$(script_args "$name")
		echo "== $b $args" >&2
		s0=$(date +%s)
		# shellcheck disable=SC2086 # args are words on purpose
		if "$b" $args >"$tmp/$name.out" 2>&1; then
			echo ok >"$tmp/$name.status"
		else
			echo "FAILED (exit $?)" >"$tmp/$name.status"
			failed+=("$name")
		fi
		echo $(($(date +%s) - s0)) >"$tmp/$name.secs"
		cat "$tmp/$name.out"
	done
fi
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
total=$(($(date +%s) - t_start))

# medians FILE: one line per benchmark and metric, "pkg<TAB>name<TAB>unit<TAB>median<TAB>runs",
# from `go test -bench` output (the -N GOMAXPROCS suffix dropped).
medians() {
	awk -F'\t' 'BEGIN { OFS = "\t" }
	/^pkg: / { pkg = substr($0, 6); sub(/^github.com\/powerglide\/powerglide\/pkg\//, "", pkg); next }
	/^Benchmark/ {
		n = split($0, f, /[ \t]+/)
		name = f[1]; sub(/-[0-9]+$/, "", name)
		for (i = 3; i + 1 <= n; i += 2) {
			k = pkg SUBSEP name SUBSEP f[i + 1]
			if (!(k in cnt)) order[++nk] = k
			vals[k, ++cnt[k]] = f[i]
		}
	}
	END {
		for (j = 1; j <= nk; j++) {
			k = order[j]; c = cnt[k]
			for (a = 1; a <= c; a++) v[a] = vals[k, a] + 0
			for (a = 2; a <= c; a++) { x = v[a]; b = a - 1; while (b >= 1 && v[b] > x) { v[b + 1] = v[b]; b-- } v[b + 1] = x }
			m = (c % 2) ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2
			split(k, p, SUBSEP)
			print p[1], p[2], p[3], m, c
		}
	}' "$1"
}
medians "$tmp/go.txt" >"$tmp/medians.tsv"

# fmtval VALUE UNIT: a readable figure.
fmtval() {
	awk -v v="$1" -v u="$2" 'BEGIN {
		if (u == "ns/op") {
			if (v >= 1e9) printf "%.2f s/op", v / 1e9
			else if (v >= 1e6) printf "%.2f ms/op", v / 1e6
			else if (v >= 1e3) printf "%.1f µs/op", v / 1e3
			else printf "%.0f ns/op", v
		} else if (u == "B/op") {
			if (v >= 1048576) printf "%.1f MB/op", v / 1048576
			else if (v >= 1024) printf "%.1f KB/op", v / 1024
			else printf "%d B/op", v
		} else if (v == int(v)) printf "%d %s", v, u
		else if (v >= 100) printf "%.0f %s", v, u
		else printf "%.3g %s", v, u
	}'
}

# gomedraw NAME UNIT: the median of one Go benchmark metric, as a number.
gomedraw() {
	awk -F'\t' -v n="$1" -v u="$2" '$2 == n && $3 == u { print $4; exit }' "$tmp/medians.tsv"
}

# gomed NAME UNIT: the median of one Go benchmark metric, readable, or "not run".
gomed() {
	local v
	v=$(gomedraw "$1" "$2")
	if [ -n "$v" ]; then fmtval "$v" "$2"; else echo "not run"; fi
}

# godiff NAME-A NAME-B UNIT: median of A minus median of B, readable.
godiff() {
	local a b
	a=$(gomedraw "$1" "$3")
	b=$(gomedraw "$2" "$3")
	if [ -n "$a" ] && [ -n "$b" ]; then fmtval "$(awk -v a="$a" -v b="$b" 'BEGIN { print a - b }')" "$3"; else echo "not run"; fi
}

# goratio NAME-A NAME-B UNIT: median of A over median of B, as "N.NN× (A; B)".
goratio() {
	local a b
	a=$(gomedraw "$1" "$3")
	b=$(gomedraw "$2" "$3")
	if [ -n "$a" ] && [ -n "$b" ]; then
		echo "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f×", a / b }') ($(fmtval "$a" "$3"); $(fmtval "$b" "$3"))"
	else
		echo "not run"
	fi
}

# shline SCRIPT REGEX: the first line a script bench printed that matches, trimmed.
shline() {
	local f="$tmp/$1.out"
	[ -f "$f" ] || { echo "not run"; return; }
	local l
	l=$(grep -E -m1 -- "$2" "$f" | sed -e 's/^[[:space:]]*//' -e 's/|/\\|/g' || true)
	echo "${l:-not printed}"
}

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)

{
	echo "# Benchmarks"
	echo
	echo "Written by \`make bench\` (scripts/bench.sh) on $started; it took ${total}s. Figures are"
	echo "medians of $count runs for the Go benchmarks and what each script bench printed (each"
	echo "script says how it aggregates: best of N, median of N or one run). Nothing here is"
	echo "asserted by a test; re-run \`make bench\` to replace this file."
	echo
	echo "## Machine"
	echo
	echo "| | |"
	echo "|---|---|"
	echo "| CPU | ${cpu:-unknown} |"
	echo "| cores | $(nproc) |"
	echo "| memory | $mem |"
	echo "| kernel | $(uname -sr) |"
	echo "| Go | $(go env GOVERSION) $(go env GOOS)/$(go env GOARCH) |"
	echo "| load average at the start | $load_start |"
	echo "| load average at the end | $load_end |"
	echo "| commit (at the start) | $commit |"
	echo
	echo "The machine may be shared: wall-clock figures rise with the load average above,"
	echo "CPU-time figures much less."
	if [ -n "${BENCH_NOTE:-}" ]; then
		echo
		echo "Note: $BENCH_NOTE"
	fi
	if [ ${#failed[@]} -gt 0 ]; then
		echo
		echo "**Failed parts:** ${failed[*]} (their output is below)."
	fi
	echo
	echo "## Targets"
	echo
	echo "The targets from the tool issues, with the figure that measures each. \"Go\" figures are"
	echo "medians of the Go benchmarks; \"script\" figures are lines printed by scripts/bench-<tool>.sh."
	echo
	echo "| tool | target | measured | source |"
	echo "|---|---|---|---|"
	while IFS='|' read -r tool target src a b; do
		from=$a
		case "$src" in
		go) m=$(gomed "$a" "$b") ;;
		sh) m=$(shline "$a" "$b") ;;
		diff) m=$(godiff "${a%%-*}" "${a#*-}" "$b"); from="${a%%-*} − ${a#*-}" ;;
		ratio) m=$(goratio "${a%%-*}" "${a#*-}" "$b"); from="${a%%-*} ÷ ${a#*-}" ;;
		esac
		echo "| $tool | $target | $m | $src: $from |"
	done <<'ROWS'
pg-llm|process start to first event ≤ 10 ms|go|BenchmarkProcessFirstEvent|ms-to-first-event
pg-llm|serve per-request overhead ≤ 1 ms (serve round trip minus the in-process call over the same local server)|diff|BenchmarkServeRequest-BenchmarkInProcessCall|ns/op
pg-llm|SSE parsing ≥ 50 MB/s (Anthropic stream)|go|BenchmarkSSEDecode/anthropic|MB/s
pg-llm|SSE parsing ≥ 50 MB/s (OpenAI stream)|go|BenchmarkSSEDecode/openai|MB/s
pg-llm|peak RSS ≤ 30 MB (one-shot process)|go|BenchmarkProcessFirstEvent|peak-RSS-MB
pg-llm|peak RSS ≤ 30 MB (serve)|go|BenchmarkServeRequest|peak-RSS-MB
pg-tool|cold `pg-tool call read` ≤ 10 ms|sh|bench-tool.sh|^cold pg-tool call read
pg-tool|serve overhead per read call ≤ 0.5 ms|sh|bench-tool.sh|^serve: read calls
pg-tool|serve read call, in-process (Go)|go|BenchmarkServeRead|ns/op
pg-tool|grep over a large tree vs ripgrep: report the ratio|sh|bench-tool.sh|ratio
pg-tool|`pg-tool mcp` per read call within 1.5× of `pg-tool serve` (Go, round trips over pipes, CPU time of both ends)|ratio|BenchmarkCallRead/mcp-BenchmarkCallRead/serve|cpu-ns/op
pg-pty|`run -- cat` 100 MB vs `script -qc`: ratio ≥ 1.0|sh|bench-pty.sh|^throughput ratio
pg-pty|start latency ≤ 10 ms|sh|bench-pty.sh|^start latency
pg-pty|holder RSS ≤ 15 MB|sh|bench-pty.sh|^holder RSS
pg-queue|claim+complete p50 ≤ 5 ms at 1,000 live tasks (fresh processes, fsync on; columns: cycles, p50, p99, claim p50, complete p50, CPU p50, ms)|sh|bench-queue.sh|^1000 live tasks
pg-queue|claim+complete p50 ≤ 20 ms at 10,000 live tasks (fresh processes, fsync on; same columns)|sh|bench-queue.sh|^10000 live tasks
pg-queue|8 concurrent workers ≥ 300 cycles/s (fsync on)|sh|bench-queue.sh|^8 concurrent workers
pg-queue|claim+complete at 1,000 live tasks, in-process library, fsync on (Go)|go|BenchmarkClaimComplete1k|ns/op
pg-queue|claim+complete at 10,000 live tasks, in-process library, fsync on (Go)|go|BenchmarkClaimComplete10k|ns/op
pg-loop|overhead per step, both coprocess round-trips ≤ 5 ms (Go, fakes)|go|BenchmarkLoopSteps|ms/step
pg-loop|overhead per step ≤ 5 ms (processes, fakes)|sh|bench-loop.sh|^fakes
pg-loop|peak RSS of pg-loop + coprocesses over 200 steps ≤ 60 MB|sh|bench-loop.sh|peak RSS
pg-loop|resume a 10,000-message session ≤ 300 ms|sh|bench-loop.sh|ready to call the model
pg-loop|replay of a 10,000-message session alone (Go)|go|BenchmarkResume10k|ns/op
pg-loop|Agent Skills discovery over 200 skills ≤ 20 ms added to launch (discovery and the prompt section; pg-tool list pays it once more)|go|BenchmarkDiscover200|ns/op
pg-monitor|one watch pass over 256 worker records ≤ 50 ms|go|BenchmarkPass|ns/op
pg-monitor|monitor RSS with 16 workers ≤ 20 MB|sh|bench-monitor.sh|^pg-monitor run
pg-dash|CPU when idle ≤ 1 %|sh|bench-dash.sh|^pg-dash cpu idle
pg-dash|frame time, 64 workers + 1,000 log lines/s ≤ 16 ms (80x24)|go|BenchmarkFrameLogFlood/80x24|ns/op
pg-dash|frame time, 64 workers + 1,000 log lines/s ≤ 16 ms (160x48)|go|BenchmarkFrameLogFlood/160x48|ns/op
pg-dash|overview frame of 64 workers ≤ 16 ms (160x48)|go|BenchmarkViewOverview64/160x48|ns/op
ROWS
	echo
	echo "## Go benchmarks (medians of $count runs)"
	echo
	if [ -s "$tmp/medians.tsv" ]; then
		echo "| package | benchmark | time | memory | allocs | other | runs |"
		echo "|---|---|---|---|---|---|---|"
		awk -F'\t' '{ print $1 "\t" $2 }' "$tmp/medians.tsv" | awk '!seen[$0]++' | while IFS=$'\t' read -r pkg name; do
			t="" m="" a="" o="" runs=""
			while IFS=$'\t' read -r _ _ unit v n; do
				runs=$n
				case "$unit" in
				ns/op) t=$(fmtval "$v" "$unit") ;;
				B/op) m=$(fmtval "$v" "$unit") ;;
				allocs/op) a=$(fmtval "$v" "$unit") ;;
				*) o="${o:+$o, }$(fmtval "$v" "$unit")" ;;
				esac
			done < <(awk -F'\t' -v p="$pkg" -v n="$name" '$1 == p && $2 == n' "$tmp/medians.tsv")
			echo "| $pkg | $name | $t | $m | $a | $o | $runs |"
		done
	else
		echo "Not run."
	fi
	echo
	echo "## Script benchmarks"
	echo
	if [ ${#scripts[@]} -eq 0 ]; then
		echo "Not run."
	fi
	for name in "${scripts[@]}"; do
		args=$(script_args "$name")
		echo "### $name"
		echo
		echo "\`scripts/$name${args:+ $args}\`: $(cat "$tmp/$name.status"), $(cat "$tmp/$name.secs") s."
		echo
		echo '```'
		# go test's per-package timing lines and build noise add nothing here.
		grep -v -E '^(ok|PASS|goos:|goarch:|cpu:|pkg:)' "$tmp/$name.out" || true
		echo '```'
		echo
	done
	echo "## Commands"
	echo
	echo '```sh'
	echo "make bench                  # = make build && scripts/bench.sh"
	echo "$gocmd"
	for name in "${scripts[@]}"; do
		args=$(script_args "$name")
		echo "scripts/$name${args:+ $args}"
	done
	echo '```'
} >"$out"
echo "bench: wrote $out (${total}s, load average $load_start at the start, $load_end at the end)" >&2
if [ ${#failed[@]} -gt 0 ]; then
	echo "bench: failed: ${failed[*]}" >&2
	exit 1
fi
