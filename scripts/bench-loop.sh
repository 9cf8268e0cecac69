#!/usr/bin/env bash
# pg-loop benchmarks (make bench): loop overhead per step through both
# coprocess round-trips with zero-latency fakes (pgfake), peak RSS of
# pg-loop and its coprocesses over a 200-step run, and resuming a
# 10,000-message session. Prints the figures; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/pg-loop" ./cmd/pg-loop
(cd pkg && go build -o "$tmp/pgfake" ./loop/internal/fake/pgfake)
export POWERGLIDE_HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/config"
mkdir -p "$tmp/work"
cd "$tmp/work"
T=/usr/bin/time
if [ ! -x "$T" ]; then
	echo "bench-loop: /usr/bin/time (GNU time) is needed for peak RSS" >&2
	exit 1
fi

steps=200
start=$(date +%s%N)
"$T" -f %M -o "$tmp/loop.rss" "$tmp/pg-loop" --json --task 'benchmark' --max-steps $((steps + 1)) \
	--llm-serve "$T -f %M -o $tmp/llm.rss $tmp/pgfake llm $steps" \
	--tools-serve "$T -f %M -o $tmp/tools.rss $tmp/pgfake tools" --tools-list "$tmp/pgfake list" >"$tmp/events.jsonl" 2>"$tmp/err"
end=$(date +%s%N)
tail -n 1 "$tmp/events.jsonl" | grep -q '<POWERGLIDE_DONE>' || { echo "bench-loop: the 200-step run did not finish" >&2; cat "$tmp/err" >&2; exit 1; }
n=$(grep -c '"type":"tool_result"' "$tmp/events.jsonl")
ms=$(( (end - start) / 1000000 ))
echo "200-step run: $n tool round-trips + $((n + 1)) model round-trips in ${ms} ms wall, $(awk -v t="$ms" -v n="$((n + 1))" 'BEGIN{printf "%.2f", t/n}') ms/step (process start included)"
l=$(cat "$tmp/loop.rss"); m=$(cat "$tmp/llm.rss"); k=$(cat "$tmp/tools.rss")
echo "peak RSS: pg-loop ${l} KB + model coprocess ${m} KB + tools coprocess ${k} KB = $(( (l + m + k) / 1024 )) MB"

# A session of 10,000 messages, resumed: the whole process, to the end of its task.
id=s-bench-resume
dir="$POWERGLIDE_HOME/sessions/$id"
mkdir -p "$dir"
now=2026-01-01T00:00:00Z
write_session() {
cat >"$dir/session.json" <<JSON
{"id":"$id","workdir":"$tmp/work","status":"running","state":"thinking","step":5000,"usage":{"input_tokens":0,"output_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0},
 "tasks":[{"id":"task-1","title":"resume","prompt":"resume","status":"claimed","priority":0,"depends_on":[],"labels":{},"attempts":0,"max_attempts":0,"claim":null,"result":null,"error":null,"created_at":"$now","updated_at":"$now"}],
 "pid":0,"created_at":"$now","updated_at":"$now"}
JSON
}
write_session
out=$(printf 'output line of a tool\\n%.0s' $(seq 9))
{
	echo '{"type":"task","ts":"'$now'","task":"task-1","status":"started","task_record":{"id":"task-1","title":"resume","prompt":"resume","status":"claimed","priority":0,"depends_on":[],"labels":{},"attempts":0,"max_attempts":0,"claim":null,"result":null,"error":null,"created_at":"'$now'","updated_at":"'$now'"}}'
	echo '{"type":"message","ts":"'$now'","task":"task-1","message":{"role":"user","content":[{"type":"text","text":"resume"}]}}'
	for i in $(seq 1 5000); do
		echo '{"type":"message","ts":"'$now'","task":"task-1","message":{"role":"assistant","content":[{"type":"tool_call","id":"c'$i'","name":"echo","input":{"n":'$i'}}]},"usage":{"input_tokens":100,"output_tokens":10,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0}}'
		echo '{"type":"message","ts":"'$now'","task":"task-1","message":{"role":"tool","content":[{"type":"tool_result","id":"c'$i'","output":"'"$out"'"}]}}'
	done
} >"$dir/memory.jsonl"
echo "session: 10,001 messages, $(du -k "$dir/memory.jsonl" | cut -f1) KB of memory.jsonl"
for run in 1 2 3; do
	start=$(date +%s%N)
	"$tmp/pg-loop" --json --resume $id --max-steps 0 --context-window 0 --llm-serve "$tmp/pgfake llm 0" --tools-serve "$tmp/pgfake tools" --tools-list "$tmp/pgfake list" >"$tmp/resume.jsonl" 2>"$tmp/err" || true
	end=$(date +%s%N)
	grep -q '"message":"resumed task task-1 with 10001 messages"' "$tmp/resume.jsonl" || { echo "bench-loop: resume failed" >&2; cat "$tmp/err" "$tmp/resume.jsonl" >&2; exit 1; }
	[ "$run" = 1 ] && cp "$tmp/resume.jsonl" "${BENCH_KEEP:-/dev/null}"
	echo "resume of 10,000 messages, run $run: $(( (end - start) / 1000000 )) ms (process start, replay, one model round-trip with the whole conversation, verify, exit)"
	# restore the session for the next run
	write_session
	head -n 10002 "$dir/memory.jsonl" >"$tmp/m" && mv "$tmp/m" "$dir/memory.jsonl"
done
