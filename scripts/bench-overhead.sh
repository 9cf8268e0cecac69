#!/usr/bin/env bash
# The harness against a bare loop (make bench; issue 21). Prints figures;
# asserts nothing.
#
# One local fake Anthropic server (pkg/llm/llmtest/fakemodel) answers both:
#   - bareloop (pkg/loop/internal/bareloop): a minimal Go program, one HTTP
#     call per step and one `bash -c` per tool call, the floor;
#   - pg-loop as users run it, with its default coprocesses, pg-llm serve
#     (anthropic provider) and pg-tool serve (bash tool, default sandbox),
# each over a task of 20 and of 200 bash steps, alternating, RUNS times
# (default 5); every figure is the median of the runs:
#   per step   time between the model requests the server saw, first to last,
#              divided by the steps between them (launch and exit left out);
#   launch     start of the process to the first model request;
#   CPU        user+sys of the whole process tree (rusage of the waited-for
#              children: pg-loop, both coprocesses, every bash);
#   peak RSS   pg-loop + pg-llm serve + pg-tool serve (each one's peak,
#              summed, as pg-loop's summary reports them); for the floor,
#              its own peak.
# Then pg-llm serve alone: one request's CPU at 10, 100 and 1,000 messages,
# full requests and appended ones (docs/protocol.md, "Held conversations").
#
# Usage: scripts/bench-overhead.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
runs=${1:-5}
tmp=$(mktemp -d)
srv=""
cleanup() {
	[ -n "$srv" ] && kill "$srv" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
T=/usr/bin/time
[ -x "$T" ] || { echo "bench-overhead: GNU time (/usr/bin/time) is needed for CPU and peak RSS" >&2; exit 1; }

# Built as `make build` builds the tools: static, stripped.
build() { CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$@"; }
build "$tmp/pg-loop" ./cmd/pg-loop
build "$tmp/pg-llm" ./cmd/pg-llm
build "$tmp/pg-tool" ./cmd/pg-tool
(cd pkg && build "$tmp/fakemodel" ./llm/llmtest/fakemodel && build "$tmp/bareloop" ./loop/internal/bareloop)

export POWERGLIDE_HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/config"
export ANTHROPIC_API_KEY=sk-ant-bench
mkdir -p "$tmp/work" "$XDG_CONFIG_HOME"
"$tmp/pg-tool" list >"$tmp/tools.json"

# The script: task benchN asks for N bash calls, then answers.
{
	echo '{"tasks":['
	sep=""
	for n in 20 200; do
		printf '%s{"match":"bench %d steps","turns":[' "$sep" "$n"
		for i in $(seq 1 "$n"); do
			printf '{"calls":[{"name":"bash","input":{"command":"echo step %d"}}]},' "$i"
		done
		printf '{"text":"done"}]}'
		sep=","
	done
	echo ']}'
} >"$tmp/script.json"
log="$tmp/requests.log"
"$tmp/fakemodel" -log "$log" "$tmp/script.json" >"$tmp/url" 2>"$tmp/fakemodel.err" &
srv=$!
for _ in $(seq 100); do [ -s "$tmp/url" ] && break; sleep 0.05; done
url=$(head -n1 "$tmp/url")
[ -n "$url" ] || { echo "bench-overhead: fakemodel did not start" >&2; cat "$tmp/fakemodel.err" >&2; exit 1; }
export ANTHROPIC_BASE_URL=$url
hz=$(getconf CLK_TCK)

# figures START-NS: "launch-ms per-step-ms requests" from the server's log.
figures() {
	awk -v s="$1" 'NR == 1 { first = $1 } { last = $1; n++ }
		END { if (n < 2) { print "bench-overhead: the server saw", n, "requests" > "/dev/stderr"; exit 1 }
		      printf "%.2f %.3f %d\n", (first - s) / 1e6, (last - first) / 1e6 / (n - 1), n }' "$log"
}

# bare STEPS: one run of the floor; prints "launch step cpu rss".
bare() {
	local n=$1 start
	: >"$log"
	start=$(date +%s%N)
	"$T" -f '%M %U %S' -o "$tmp/bare.time" "$tmp/bareloop" -url "$url" -tools "$tmp/tools.json" "bench $n steps: run $n bash commands" >"$tmp/bare.out"
	read -r launch step reqs < <(figures "$start")
	[ "$reqs" = $((n + 1)) ] || { echo "bench-overhead: bareloop made $reqs requests for $n steps" >&2; exit 1; }
	read -r m u s <"$tmp/bare.time"
	echo "$launch $step $(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.0f", (u + s) * 1000 }') $(awk -v m="$m" 'BEGIN { printf "%.1f", m / 1024 }')"
}

# harness STEPS: one run of pg-loop as users run it, with its default
# components (pg-llm serve and pg-tool serve, found next to it); prints
# "launch step cpu rss rss-split cpu-split". The CPU of the whole tree is
# GNU time's (pg-loop waits for its coprocesses, and they for their
# children); each coprocess's CPU and peak RSS, and pg-loop's own peak,
# are the kernel's figures that pg-loop reports in its summary
# (resources).
harness() {
	local n=$1 start
	: >"$log"
	start=$(date +%s%N)
	(cd "$tmp/work" && exec "$T" -f '%U %S' -o "$tmp/loop.time" "$tmp/pg-loop" --json --no-session --task "bench $n steps: run $n bash commands" --max-steps $((n + 50)) \
		--model anthropic/claude-sonnet-4-5 >"$tmp/events.jsonl" 2>"$tmp/err") || true
	tail -n 1 "$tmp/events.jsonl" | grep -q '<POWERGLIDE_DONE>' || { echo "bench-overhead: the pg-loop run of $n steps did not finish" >&2; tail -n 5 "$tmp/events.jsonl" "$tmp/err" >&2; exit 1; }
	read -r launch step reqs < <(figures "$start")
	[ "$reqs" = $((n + 1)) ] || { echo "bench-overhead: pg-loop made $reqs requests for $n steps" >&2; exit 1; }
	read -r u s <"$tmp/loop.time"
	# "component cpu-ms rss-kb" per line, from the summary's resources
	grep '^{"type":"summary"' "$tmp/events.jsonl" | grep -o '{"component":[^}]*}' |
		sed -E 's/.*"component":"([a-z]+)".*"user_ms":([0-9.e+-]+).*"sys_ms":([0-9.e+-]+).*"max_rss_kb":([0-9]+).*/\1 \2 \3 \4/' >"$tmp/resources"
	awk -v launch="$launch" -v step="$step" -v u="$u" -v s="$s" '
		{ cpu[$1] = $2 + $3; rss[$1] = $4 / 1024 }
		END {
			if (!("loop" in rss) || !("model" in rss) || !("tools" in rss)) { print "bench-overhead: the summary lacks resources" > "/dev/stderr"; exit 1 }
			total = (u + s) * 1000
			printf "%s %s %.0f %.1f %.1f+%.1f+%.1f %.0f+%.0f+%.0f\n", launch, step, total, rss["loop"] + rss["model"] + rss["tools"], rss["loop"], rss["model"], rss["tools"],
				total - cpu["model"] - cpu["tools"], cpu["model"], cpu["tools"] }' "$tmp/resources"
}

# median COLUMN FILE
median() {
	awk -v c="$1" '{ print $c }' "$2" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "harness against a bare loop: one fake Anthropic server, medians of $runs runs each (alternating); load average $(cut -d' ' -f1-3 /proc/loadavg)"
for n in 20 200; do
	: >"$tmp/bare.$n"
	: >"$tmp/loop.$n"
	for _ in $(seq "$runs"); do
		bare "$n" >>"$tmp/bare.$n"
		harness "$n" >>"$tmp/loop.$n"
	done
	bs=$(median 2 "$tmp/bare.$n") bl=$(median 1 "$tmp/bare.$n") bc=$(median 3 "$tmp/bare.$n") br=$(median 4 "$tmp/bare.$n")
	ls=$(median 2 "$tmp/loop.$n") ll=$(median 1 "$tmp/loop.$n") lc=$(median 3 "$tmp/loop.$n") lr=$(median 4 "$tmp/loop.$n")
	# the split of the median run's RSS and CPU
	mid=$(sort -t' ' -k3 -g "$tmp/loop.$n" | sed -n "$(((runs + 1) / 2))p")
	echo "$n steps, bare loop: per step $bs ms, launch $bl ms, CPU $bc ms, peak RSS $br MB"
	echo "$n steps, pg-loop: per step $ls ms, launch $ll ms, CPU $lc ms (pg-loop+pg-llm+pg-tool with its children $(cut -d' ' -f6 <<<"$mid")), peak RSS $lr MB (pg-loop+pg-llm+pg-tool $(cut -d' ' -f5 <<<"$mid"))"
	awk -v n="$n" -v bs="$bs" -v ls="$ls" -v bl="$bl" -v ll="$ll" -v bc="$bc" -v lc="$lc" -v lr="$lr" 'BEGIN {
		printf "per step, %d steps: %.2fx the bare loop (target 1.3x)\n", n, ls / bs
		printf "launch, %d steps: %.2fx the bare loop (target 2x)\n", n, ll / bl
		printf "CPU, %d steps: %.2fx the bare loop (target 1.5x)\n", n, lc / bc
		printf "peak RSS, %d steps: %.1f MB together (target 40 MB)\n", n, lr }'
done
