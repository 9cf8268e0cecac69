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
#      output, docs/scaling.md (a team across machines, on paper) and the
#      exact commands.
#
# Environment: BENCH_COUNT (default 5), BENCH_OUT (default BENCHMARKS.md),
# BENCH_SKIP_GO=1 or BENCH_SKIP_SCRIPTS=1 to leave a part out (the report
# says so), BENCH_NOTE=TEXT adds a note under the machine (e.g. what else
# ran), BENCH_GO_OUTPUT=FILE to report saved `go test -bench` output
# instead of running the Go benchmarks again, BENCH_SCRIPT_OUTPUT=DIR the
# same for the script benches (DIR/bench-<tool>.sh.out each).
#
# The targets table says of every target whether the figure met it; the
# targets are the ROWS list in targets() below, one line each, and adding
# one is adding a line there (the format is written above targets()).
#
# Exit status: 0 when every part ran, 1 when one failed (the report is
# still written and names it).
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
		if [ -n "${BENCH_SCRIPT_OUTPUT:-}" ]; then
			# Saved output, e.g. to check the report on known figures.
			if [ -f "$BENCH_SCRIPT_OUTPUT/$name.out" ]; then
				cp "$BENCH_SCRIPT_OUTPUT/$name.out" "$tmp/$name.out"
				echo "reused from $BENCH_SCRIPT_OUTPUT" >"$tmp/$name.status"
			else
				: >"$tmp/$name.out"
				echo "no saved output in $BENCH_SCRIPT_OUTPUT" >"$tmp/$name.status"
			fi
			echo 0 >"$tmp/$name.secs"
			continue
		fi
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

# shline SCRIPT REGEX: the first line a script bench printed that matches, trimmed.
shline() {
	local f="$tmp/$1.out"
	[ -f "$f" ] || { echo "not run"; return; }
	local l
	l=$(grep -E -m1 -- "$2" "$f" | sed -e 's/^[[:space:]]*//' -e 's/|/\\|/g' || true)
	echo "${l:-not printed}"
}

# nth TEXT N: the Nth number in TEXT (1.5, 200, 13400; "200-line" counts).
nth() {
	# no number at all is an empty answer, not a failure that would end
	# the report under set -e
	{ grep -oE '[0-9]+(\.[0-9]+)?' <<<"$1" || true; } | sed -n "${2}p"
}

# verdict VALUE CHECK UNIT: "met" or "**missed**" for VALUE against CHECK,
# "<=N" or ">=N" with an optional unit (ns, µs, us, ms, s) that a Go time
# (UNIT ns/op) is converted to first; "report" for "-"; "no check" when a
# row has none; "not measured" when there is no value.
verdict() {
	local v=$1 check=$2 unit=$3
	case "$check" in
	-) echo report; return ;;
	"<="* | ">="*) ;;
	*) echo "no check"; return ;;
	esac
	[ -n "$v" ] || { echo "not measured"; return; }
	awk -v v="$v" -v c="$check" -v u="$unit" 'BEGIN {
		op = substr(c, 1, 2); c = substr(c, 3)
		n = c + 0; sub(/^[0-9.]+/, "", c)
		if (u == "ns/op") {
			if (c == "s") v /= 1e9; else if (c == "ms") v /= 1e6; else if (c == "µs" || c == "us") v /= 1e3
		}
		ok = (op == "<=") ? v <= n : v >= n
		print ok ? "met" : "**missed**"
	}'
}

# targets: one table row per line of the ROWS list below, measured and
# checked. Adding a target is adding one line there, fields split by "|":
#
#   tool|target as the issue words it|KIND|ARGS...|CHECK
#
#   KIND go      ARGS  Benchmark/sub|unit             the median of that metric
#   KIND diff    ARGS  BenchA-BenchB|unit             median of A minus median of B
#   KIND ratio   ARGS  BenchA-BenchB|unit             median of A over median of B
#   KIND sh      ARGS  bench-x.sh|ERE[|#N]            the first line bench-x.sh printed that
#                                                     matches ERE; its Nth number (default #1)
#   KIND shratio ARGS  bench-x.sh|ERE-A|#N|ERE-B|#M   number N of line A over number M of line B
#
#   CHECK  "<=10ms", ">=50", "<=1.3" ...: met or missed against the number above
#          (a Go time in ns/op is converted to the unit written: ns, µs, us, ms, s;
#          other units are compared as they are); "-": a figure to report, no bound.
#          A row without a CHECK is shown as "no check".
targets() {
	local row f tool target kind check n m v from unit line a b
	while IFS= read -r row; do
		case "$row" in "" | "#"*) continue ;; esac
		IFS='|' read -r -a f <<<"$row"
		tool=${f[0]} target=${f[1]} kind=${f[2]}
		n=${#f[@]} check=${f[n-1]}
		case "$check" in "<="* | ">="* | -) n=$((n - 1)) ;; *) check="" ;; esac
		v="" unit="" from=${f[3]}
		case "$kind" in
		go)
			unit=${f[4]}
			m=$(gomed "${f[3]}" "$unit")
			v=$(gomedraw "${f[3]}" "$unit")
			;;
		diff | ratio)
			unit=${f[4]}
			a=$(gomedraw "${f[3]%%-*}" "$unit")
			b=$(gomedraw "${f[3]#*-}" "$unit")
			if [ -z "$a" ] || [ -z "$b" ]; then
				m="not run"
			elif [ "$kind" = diff ]; then
				v=$(awk -v a="$a" -v b="$b" 'BEGIN { print a - b }')
				m=$(fmtval "$v" "$unit")
				from="${f[3]%%-*} − ${f[3]#*-}"
			else
				v=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4g", a / b }')
				m="$(awk -v v="$v" 'BEGIN { printf "%.2f×", v }') ($(fmtval "$a" "$unit"); $(fmtval "$b" "$unit"))"
				from="${f[3]%%-*} ÷ ${f[3]#*-}"
			fi
			;;
		sh)
			m=$(shline "${f[3]}" "${f[4]}")
			local k=1
			[ "$n" -gt 5 ] && k=${f[5]#\#}
			case "$m" in "not run" | "not printed") ;; *) v=$(nth "$m" "$k") ;; esac
			case "$check" in "<="* | ">="*) from="${f[3]} #$k" ;; esac
			;;
		shratio)
			a=$(shline "${f[3]}" "${f[4]}")
			b=$(shline "${f[3]}" "${f[6]}")
			a=$(nth "$a" "${f[5]#\#}") b=$(nth "$b" "${f[7]#\#}")
			if [ -n "$a" ] && [ -n "$b" ]; then
				v=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4g", a / b }')
				m="$(awk -v v="$v" 'BEGIN { printf "%.2f×", v }') ($a against $b)"
			else
				m="not printed"
			fi
			from="${f[3]} ${f[5]} ÷ ${f[7]}"
			;;
		*) m="unknown kind $kind" ;;
		esac
		echo "| $tool | $target | $m | $(verdict "$v" "$check" "$unit") | $kind: $from |"
	done <<'ROWS'
pg-llm|process start to first event ≤ 10 ms|go|BenchmarkProcessFirstEvent|ms-to-first-event|<=10
pg-llm|serve per-request overhead ≤ 1 ms (serve round trip minus the in-process call over the same local server)|diff|BenchmarkServeRequest-BenchmarkInProcessCall|ns/op|<=1ms
pg-llm|SSE parsing ≥ 50 MB/s (Anthropic stream)|go|BenchmarkSSEDecode/anthropic|MB/s|>=50
pg-llm|SSE parsing ≥ 50 MB/s (OpenAI stream)|go|BenchmarkSSEDecode/openai|MB/s|>=50
pg-llm|peak RSS ≤ 30 MB (one-shot process)|go|BenchmarkProcessFirstEvent|peak-RSS-MB|<=30
pg-llm|peak RSS ≤ 30 MB (serve)|go|BenchmarkServeRequest|peak-RSS-MB|<=30
pg-llm|serve CPU per request, 10 messages, continuing a held conversation (issue 21)|go|BenchmarkServeConversation/msgs=10/after|cpu-ms/req|-
pg-llm|serve CPU per request, 1,000 messages, continuing a held conversation: grows only with the bytes sent (issue 21)|go|BenchmarkServeConversation/msgs=1000/after|cpu-ms/req|-
pg-llm|serve CPU per request, 1,000 messages, whole request (issue 21)|go|BenchmarkServeConversation/msgs=1000/full|cpu-ms/req|-
pg-tool|cold `pg-tool call read` ≤ 10 ms (CPU)|sh|bench-tool.sh|^cold pg-tool call read|#2|<=10
pg-tool|serve overhead per read call ≤ 0.5 ms|sh|bench-tool.sh|^serve: read calls|#1|<=0.5
pg-tool|serve read call, in-process (Go)|go|BenchmarkServeRead|ns/op|-
pg-tool|the sandbox adds ≤ 1 ms median to a bash `true` (issue 15; µs, with and without in the Go table)|go|BenchmarkBashTrue|added-us|<=1000
pg-tool|grep over a large tree vs ripgrep: report the ratio|sh|bench-tool.sh|ratio|-
pg-tool|`pg-tool mcp` per read call within 1.5× of `pg-tool serve` (Go, round trips over pipes; issue 19)|ratio|BenchmarkCallRead/mcp-BenchmarkCallRead/serve|ns/op|<=1.5
pg-pty|`run -- cat` 100 MB vs `script -qc`: ratio ≥ 1.0 (by wall time)|sh|bench-pty.sh|^throughput ratio|#1|>=1.0
pg-pty|start latency ≤ 10 ms|sh|bench-pty.sh|^start latency|#2|<=10
pg-pty|holder RSS ≤ 15 MB (after 10 MB of output)|sh|bench-pty.sh|^holder RSS|#3|<=15
pg-queue|claim+complete p50 ≤ 5 ms at 1,000 live tasks (fresh processes, fsync on; columns: cycles, p50, p99, claim p50, complete p50, CPU p50, ms)|sh|bench-queue.sh|^1000 live tasks|#3|<=5
pg-queue|claim+complete p50 ≤ 20 ms at 10,000 live tasks (fresh processes, fsync on; same columns)|sh|bench-queue.sh|^10000 live tasks|#3|<=20
pg-queue|claim+complete p50 and p99 at 100,000 live tasks: report (same columns)|sh|bench-queue.sh|^100000 live tasks|#3|-
pg-queue|100,000 finished tasks do not slow claim+complete down: p50 at 1,000 live + 100,000 finished ≤ 1.1× the p50 at 1,000 live|shratio|bench-queue.sh|^1000 live \+ 100000 finished|#4|^1000 live tasks|#3|<=1.1
pg-queue|8 concurrent workers ≥ 300 cycles/s (fsync on)|sh|bench-queue.sh|^8 concurrent workers|#5|>=300
pg-queue|claim+complete at 1,000 live tasks, in-process library, fsync on (Go)|go|BenchmarkClaimComplete1k|ns/op|-
pg-queue|claim+complete at 10,000 live tasks, in-process library, fsync on (Go)|go|BenchmarkClaimComplete10k|ns/op|-
pg-queue|on PostgreSQL: claim+complete p50 at 1,000 live tasks ≤ 1.5× the file store's (fresh processes, fsync on in both; as pg-queue runs by default, through the host's store agent; issue 17)|sh|bench-store.sh|^postgres through the store agent vs file at 1000|#5|<=1.5
pg-queue|on PostgreSQL: claim+complete p50 flat from 1,000 to 100,000 live tasks (p50 at 100k ≤ 1.3× at 1k; through the store agent; issue 17)|sh|bench-store.sh|^postgres through the store agent from 1000|#7|<=1.3
pg-queue|on PostgreSQL, each command connecting itself (store_agent=off): claim+complete p50 at 1,000 live tasks vs the file store's: report|sh|bench-store.sh|^postgres vs file at 1000|#5|-
pg-queue|on PostgreSQL, each command connecting itself (store_agent=off): p50 from 1,000 to 100,000 live tasks: report|sh|bench-store.sh|^postgres from 1000|#7|-
pg-queue|on PostgreSQL through PgBouncer (session mode): claim+complete p50 at 1,000 live tasks ≤ 1.5× the file store's (fresh processes)|sh|bench-store.sh|^postgres through pgbouncer vs file at 1000|#5|<=1.5
pg-queue|on PostgreSQL, in-process: 32 concurrent workers ≥ 1,000 claim+complete cycles/s (synchronous commit on; issue 17)|go|BenchmarkClaimComplete32/commit=sync|cycles/s|>=1000
pg-queue|the same with synchronous_commit off: report|go|BenchmarkClaimComplete32/commit=async|cycles/s|-
pg-loop|overhead per step, both coprocess round-trips ≤ 5 ms (Go, fakes)|go|BenchmarkLoopSteps|ms/step|<=5
pg-loop|overhead per step ≤ 5 ms (processes, fakes)|sh|bench-loop.sh|^fakes|#5|<=5
pg-loop|peak RSS of pg-loop + coprocesses over 200 steps ≤ 60 MB|sh|bench-loop.sh|peak RSS|#4|<=60
pg-loop|resume a 10,000-message session ≤ 300 ms|sh|bench-loop.sh|ready to call the model|#2|<=300
pg-loop|replay of a 10,000-message session alone (Go)|go|BenchmarkResume10k|ns/op|-
pg-loop|harness overhead per step at 10 messages: report (issue 16)|go|BenchmarkStepOverhead/msgs=10/bytes|ns/op|-
pg-loop|harness overhead per step at 100 messages: report (issue 16)|go|BenchmarkStepOverhead/msgs=100/bytes|ns/op|-
pg-loop|harness overhead per step at 1,000 messages: report (issue 16)|go|BenchmarkStepOverhead/msgs=1000/bytes|ns/op|-
pg-loop|compacting a 1,000-message session ≤ 50 ms of harness time (issue 16)|go|BenchmarkCompact1000/bytes|ms/compaction|<=50
pg-loop|Agent Skills discovery over 200 skills ≤ 20 ms added to launch (discovery and the prompt section; pg-tool list pays it once more)|go|BenchmarkDiscover200|ns/op|<=20ms
pg-loop|per-step harness cost within 1.3× of a bare loop, 20 steps (issue 21)|sh|bench-overhead.sh|^per step, 20 steps|#2|<=1.3
pg-loop|per-step harness cost within 1.3× of a bare loop, 200 steps (issue 21)|sh|bench-overhead.sh|^per step, 200 steps|#2|<=1.3
pg-loop|launch to the first model request within 2× of a bare loop (issue 21)|sh|bench-overhead.sh|^launch, 20 steps|#2|<=2
pg-loop|CPU of pg-loop + coprocesses over 200 steps within 1.5× of a bare loop (issue 21)|sh|bench-overhead.sh|^CPU, 200 steps|#2|<=1.5
pg-loop|peak RSS of pg-loop + coprocesses at 200 steps ≤ 40 MB (issue 21)|sh|bench-overhead.sh|^peak RSS, 200 steps|#2|<=40
pg-monitor|one watch pass over 256 worker records ≤ 50 ms|go|BenchmarkPass|ns/op|<=50ms
pg-monitor|monitor RSS with 16 workers ≤ 20 MB (20,480 KB)|sh|bench-monitor.sh|^pg-monitor run|#3|<=20480
pg-dash|CPU when idle ≤ 1 %|sh|bench-dash.sh|^pg-dash cpu idle|#1|<=1
pg-dash|frame time, 64 workers + 1,000 log lines/s ≤ 16 ms (80x24)|go|BenchmarkFrameLogFlood/80x24|ns/op|<=16ms
pg-dash|frame time, 64 workers + 1,000 log lines/s ≤ 16 ms (160x48)|go|BenchmarkFrameLogFlood/160x48|ns/op|<=16ms
pg-dash|overview frame of 64 workers ≤ 16 ms (160x48)|go|BenchmarkViewOverview64/160x48|ns/op|<=16ms
ROWS
}

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)

{
	echo "# Benchmarks"
	echo
	echo "Written by \`make bench\` (scripts/bench.sh) on $started; it took ${total}s (about $(( (total + 30) / 60 )) minutes). Figures are"
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
	echo "The targets from the issues, with the figure that measures each and whether it met the"
	echo "target (\"report\": a figure asked for without a bound). \"go\" figures are medians of the"
	echo "Go benchmarks; \"sh\" figures are lines printed by scripts/bench-<tool>.sh, the number"
	echo "checked being the one the source column names (#N: the Nth number of the line)."
	echo
	echo "| tool | target | measured | met? | source |"
	echo "|---|---|---|---|---|"
	targets
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
	# What a team across machines needs, worked out on paper from the
	# store's figures: a page of its own, its headings one level down.
	if [ -f docs/scaling.md ]; then
		sed -e 's/^#/##/' docs/scaling.md
		echo
	fi
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
