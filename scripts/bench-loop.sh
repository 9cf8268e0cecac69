#!/usr/bin/env bash
# pg-loop benchmarks (make bench). Prints figures; asserts nothing.
#  1. a 200-step run through both coprocess round-trips, with zero-latency
#     fakes (pgfake) and, when they are in the tree, the real pg-llm serve
#     (replay provider, a hand-written 201-call session) and pg-tool serve
#     (the read tool): wall time and CPU per step, and the peak RSS of
#     pg-loop and of each coprocess;
#  2. resuming a session of 10,000 messages.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/pg-loop" ./cmd/pg-loop
(cd pkg && go build -o "$tmp/pgfake" ./loop/internal/fake/pgfake)
real=0
if [ -d cmd/pg-llm ] && [ -d cmd/pg-tool ]; then
	go build -o "$tmp/pg-llm" ./cmd/pg-llm
	go build -o "$tmp/pg-tool" ./cmd/pg-tool
	real=1
fi
export POWERGLIDE_HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/config"
mkdir -p "$tmp/work"
echo hello >"$tmp/work/f.txt"
cd "$tmp/work"
T=/usr/bin/time
[ -x "$T" ] || { echo "bench-loop: GNU time (/usr/bin/time) is needed for the coprocesses' peak RSS" >&2; exit 1; }
hz=$(getconf CLK_TCK)
steps=200

# run NAME LLM-SERVE TOOLS-SERVE TOOLS-LIST: one 200-step task.
run() {
	local name=$1 llm=$2 tools=$3 list=$4
	local start end pid hwm=0 ticks=0 h c
	start=$(date +%s%N)
	"$tmp/pg-loop" --json --task benchmark --max-steps $((steps + 1)) --breaker-repeat 0 --breaker-failures 0 --breaker-output 0 --breaker-cycle 0 \
		--llm-serve "$T -f '%M %U %S' -o $tmp/llm.rss $llm" \
		--tools-serve "$T -f '%M %U %S' -o $tmp/tools.rss $tools" --tools-list "$list" >"$tmp/events.jsonl" 2>"$tmp/err" &
	pid=$!
	# pg-loop's own peak (VmHWM) and CPU, sampled until it exits: GNU time
	# would fold the coprocesses' peak into pg-loop's.
	while kill -0 $pid 2>/dev/null; do
		h=$(awk '/^VmHWM/{print $2}' /proc/$pid/status 2>/dev/null || true)
		c=$(awk '{print $14+$15}' /proc/$pid/stat 2>/dev/null || true)
		[ -n "$h" ] && hwm=$h
		[ -n "$c" ] && ticks=$c
		sleep 0.005
	done
	wait $pid || true
	end=$(date +%s%N)
	tail -n 1 "$tmp/events.jsonl" | grep -q '<POWERGLIDE_DONE>' || { echo "bench-loop: the $name run did not finish" >&2; cat "$tmp/err" >&2; exit 1; }
	local n ms
	n=$(grep -c '"type":"tool_result"' "$tmp/events.jsonl")
	ms=$(((end - start) / 1000000))
	read -r lm lu ls <"$tmp/llm.rss"
	read -r tm tu ts <"$tmp/tools.rss"
	awk -v name="$name" -v n="$n" -v ms="$ms" -v hz="$hz" -v t="$ticks" -v h="$hwm" -v lm="$lm" -v lu="$lu" -v ls="$ls" -v tm="$tm" -v tu="$tu" -v ts="$ts" 'BEGIN{
		s = n + 1
		printf "%s: %d steps (%d model + %d tool round-trips) in %d ms wall = %.2f ms/step\n", name, s, s, n, ms, ms / s
		printf "  CPU per step: pg-loop %.2f ms, model coprocess %.2f ms, tools coprocess %.2f ms\n", t / hz * 1000 / s, (lu + ls) * 1000 / s, (tu + ts) * 1000 / s
		printf "  peak RSS: pg-loop %.1f MB + model %.1f MB + tools %.1f MB = %.1f MB\n", h / 1024, lm / 1024, tm / 1024, (h + lm + tm) / 1024
	}'
}

run "fakes (pgfake)" "$tmp/pgfake llm $steps" "$tmp/pgfake tools" "$tmp/pgfake list"
if [ $real = 1 ]; then
	# a hand-written replay session: 200 read calls, then an answer
	{
		for i in $(seq 0 $((steps - 1))); do
			echo '{"type":"call","events":[{"type":"end","stop_reason":"tool_use","message":{"role":"assistant","content":[{"type":"tool_call","id":"c'$i'","name":"read","input":{"path":"f.txt"}}]},"usage":{"input_tokens":10,"output_tokens":5,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0.0001}}]}'
		done
		echo '{"type":"call","events":[{"type":"end","stop_reason":"end_turn","message":{"role":"assistant","content":"done"},"usage":{"input_tokens":10,"output_tokens":5,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0.0001}}]}'
	} >"$tmp/session.jsonl"
	run "real pg-llm serve (replay) + pg-tool serve" "$tmp/pg-llm serve --model replay/$tmp/session.jsonl" "$tmp/pg-tool serve" "$tmp/pg-tool list"
fi

# A session of 10,000 messages, resumed: the whole process, to the end of its task.
id=s-bench-resume
dir="$POWERGLIDE_HOME/sessions/$id"
mkdir -p "$dir"
now=2026-01-01T00:00:00Z
task='{"id":"task-1","title":"resume","prompt":"resume","status":"claimed","priority":0,"depends_on":[],"labels":{},"attempts":0,"max_attempts":0,"claim":null,"result":null,"error":null,"created_at":"'$now'","updated_at":"'$now'"}'
write_session() {
	echo '{"id":"'$id'","workdir":"'$tmp/work'","status":"running","state":"thinking","step":5000,"usage":{"input_tokens":0,"output_tokens":0,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0},"tasks":['"$task"'],"pid":0,"created_at":"'$now'","updated_at":"'$now'"}' >"$dir/session.json"
}
write_session
out=$(printf 'output line of a tool\\n%.0s' $(seq 9))
{
	echo '{"type":"task","ts":"'$now'","task":"task-1","status":"started","task_record":'"$task"'}'
	echo '{"type":"message","ts":"'$now'","task":"task-1","message":{"role":"user","content":[{"type":"text","text":"resume"}]}}'
	for i in $(seq 1 5000); do
		echo '{"type":"message","ts":"'$now'","task":"task-1","message":{"role":"assistant","content":[{"type":"tool_call","id":"c'$i'","name":"echo","input":{"n":'$i'}}]},"usage":{"input_tokens":100,"output_tokens":10,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0}}'
		echo '{"type":"message","ts":"'$now'","task":"task-1","message":{"role":"tool","content":[{"type":"tool_result","id":"c'$i'","output":"'"$out"'"}]}}'
	done
} >"$dir/memory.jsonl"
cp "$dir/memory.jsonl" "$tmp/memory.orig"
echo "resume: a session of 10,001 messages, $(du -k "$dir/memory.jsonl" | cut -f1) KB of memory.jsonl"
for run in 1 2 3; do
	start=$(date +%s%N)
	"$T" -f '%U %S' -o "$tmp/resume.cpu" "$tmp/pg-loop" --json --resume $id --max-steps 0 --context-window 0 --llm-serve "$tmp/pgfake llm 0" --tools-serve "$tmp/pgfake tools" --tools-list "$tmp/pgfake list" >"$tmp/resume.jsonl" 2>"$tmp/err" || true
	end=$(date +%s%N)
	grep -q '"message":"resumed task task-1 with 10001 messages"' "$tmp/resume.jsonl" || { echo "bench-loop: resume failed" >&2; cat "$tmp/err" "$tmp/resume.jsonl" >&2; exit 1; }
	read -r ru rs <"$tmp/resume.cpu"
	ready=$(grep -m1 '"from":"pick_task","to":"thinking"' "$tmp/resume.jsonl" | sed 's/.*"ts":"\([^"]*\)".*/\1/')
	ready_ns=$(date -d "$ready" +%s%N)
	echo "  run $run: ready to call the model $(((ready_ns - start) / 1000000)) ms after the start (session read and replayed)"
	echo "  run $run: $(((end - start) / 1000000)) ms wall, $(awk -v u="$ru" -v s="$rs" 'BEGIN{printf "%.0f", (u + s) * 1000}') ms CPU (pg-loop and its model fake) for the whole process: start, replay, one model round-trip carrying all 10,001 messages, exit"
	write_session
	cp "$tmp/memory.orig" "$dir/memory.jsonl"
done
(cd "$root/pkg" && go test -run '^$' -bench 'Resume10k' -benchtime 10x ./loop/ | grep Benchmark | sed 's/^/  replay alone (Go benchmark, wall): /')

# The harness's own work per step by conversation length (instant
# in-process model; o200k = an OpenAI model counted with its tokenizer,
# bytes = any other model; +encoded adds the request's JSON encoding a
# coprocess model needs), and the compaction of a 1,000-message
# conversation past the hard threshold (the summary call answered at once).
(cd "$root/pkg" && go test -run '^$' -bench 'StepOverhead|Compact1000' -benchtime 200x ./loop/ | grep Benchmark | sed 's/^/  /')

# Agent Skills: launch to the first model request with 200 skills in
# ~/.claude/skills against none (--no-skills), the real pg-tool listing
# the tools; the median of 7 runs each.
if [ $real = 1 ]; then
	skhome="$tmp/skillhome"
	for i in $(seq -w 1 200); do
		mkdir -p "$skhome/.claude/skills/skill-$i"
		{
			printf -- '---\nname: skill-%s\ndescription: Use this skill when the task is about topic %s; it explains the steps.\n---\n' "$i" "$i"
			printf 'Body text of the skill.\n%.0s' $(seq 200)
		} >"$skhome/.claude/skills/skill-$i/SKILL.md"
	done
	launch() { # prints ms from the start to the first thinking state
		local start ready
		start=$(date +%s%N)
		HOME="$skhome" "$tmp/pg-loop" --json --no-session --task launch "$@" --llm-serve "$tmp/pgfake llm 0" --tools-serve "$tmp/pg-tool serve" --tools-list "$tmp/pg-tool list" >"$tmp/launch.jsonl" 2>"$tmp/err" || true
		ready=$(grep -m1 '"from":"pick_task","to":"thinking"' "$tmp/launch.jsonl" | sed 's/.*"ts":"\([^"]*\)".*/\1/')
		[ -n "$ready" ] || { echo "bench-loop: the launch run failed" >&2; cat "$tmp/err" >&2; exit 1; }
		echo $((($(date -d "$ready" +%s%N) - start) / 1000000))
	}
	median() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
	with=$(for i in 1 2 3 4 5 6 7; do launch; done | median)
	without=$(for i in 1 2 3 4 5 6 7; do launch --no-skills; done | median)
	echo "skills: launch to the first model call with 200 skills $with ms, with --no-skills $without ms: $((with - without)) ms added (median of 7)"
fi
