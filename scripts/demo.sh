#!/usr/bin/env bash
# The demo swarm: three pg-loop workers under pg-monitor fix the failing
# packages of testdata/demo/repo, taking their tasks from pg-queue; every
# task is checked by the repository's own tests; pg-dash shows the result.
#
#   scripts/demo.sh            replay the recorded model (no key, no network),
#                              or the live provider when ANTHROPIC_API_KEY or
#                              OPENAI_API_KEY is set
#   scripts/demo.sh --replay   replay even when a key is set
#   scripts/demo.sh --record   re-record testdata/demo/session.jsonl: pg-llm
#                              --record against a local scripted model
#                              (testdata/demo/script.json), one worker
#
# Everything runs in a new temporary directory (POWERGLIDE_HOME, config and a
# copy of the repository); ~/.powerglide and your config are never touched.
# Set POWERGLIDE_DEMO_MODEL to pick the live model.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
demo_data=$root/testdata/demo
session=$demo_data/session.jsonl

mode=auto
case "${1:-}" in
"") ;;
--replay) mode=replay ;;
--record) mode=record ;;
-h | --help)
	sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "demo: error: unknown argument ${1} (try --help)" >&2
	exit 2
	;;
esac

# The tools come from bin/ (make demo builds them there); the e2e test
# points POWERGLIDE_DEMO_BIN at its own.
bin=${POWERGLIDE_DEMO_BIN:-$root/bin}
for t in pg-queue pg-monitor pg-loop pg-llm pg-tool pg-dash; do
	if [ ! -x "$bin/$t" ]; then
		echo "demo: error: $bin/$t is missing; run 'make demo' (it builds first)" >&2
		exit 1
	fi
done
if ! command -v go >/dev/null; then
	echo "demo: error: the demo repository is checked with 'go test'; go is not on PATH" >&2
	exit 1
fi
export PATH="$bin:$PATH"

work=$(mktemp -d "${TMPDIR:-/tmp}/powerglide-demo.XXXXXX")
# None of your powerglide settings leak in: a tools dir, MCP servers or a
# model of your own would change what the workers send, and the replay
# would no longer match.
while read -r var; do unset "$var"; done < <(compgen -e | grep '^POWERGLIDE_' || true)
export POWERGLIDE_HOME=$work/home XDG_CONFIG_HOME=$work/config
repo=$work/repo
team=demo
cp -R "$demo_data/repo" "$repo"
if command -v git >/dev/null; then
	git -C "$repo" init -q
	git -C "$repo" add -A
	git -C "$repo" -c user.name=demo -c user.email=demo@localhost commit -qm "demo repository"
fi

workers=3
monitor_flags=()
loop_flags=(--max-steps 30)
case $mode in
auto | replay)
	if [ "$mode" = auto ] && [ -n "${ANTHROPIC_API_KEY:-}" ]; then
		model=${POWERGLIDE_DEMO_MODEL:-anthropic/claude-sonnet-4-5}
	elif [ "$mode" = auto ] && [ -n "${OPENAI_API_KEY:-}" ]; then
		model=${POWERGLIDE_DEMO_MODEL:-openai/gpt-4.1}
	else
		model=replay/$session
	fi
	;;
record)
	workers=1
	(cd "$root/pkg" && go build -o "$work/fakemodel" ./llm/llmtest/fakemodel)
	"$work/fakemodel" "$demo_data/script.json" >"$work/fakemodel.url" 2>"$work/fakemodel.err" &
	fake=$!
	trap 'kill $fake 2>/dev/null || true' EXIT
	for _ in $(seq 100); do [ -s "$work/fakemodel.url" ] && break; sleep 0.05; done
	export ANTHROPIC_BASE_URL ANTHROPIC_API_KEY=demo-recording
	ANTHROPIC_BASE_URL=$(head -n1 "$work/fakemodel.url")
	model=anthropic/claude-sonnet-4-5
	: >"$work/session.jsonl"
	loop_flags+=(--llm-serve "pg-llm serve --record $work/session.jsonl")
	;;
esac

case $model in
replay/*) echo "demo: replaying the recorded model (testdata/demo/session.jsonl): no key, no network" ;;
anthropic/* | openai/*)
	if [ "$mode" = record ]; then
		echo "demo: recording against the local scripted model at $ANTHROPIC_BASE_URL"
	else
		echo "demo: using the LIVE provider, model $model (the team stops at \$1.00)"
		monitor_flags+=(--budget-usd 1)
	fi
	;;
esac
echo "demo: POWERGLIDE_HOME=$POWERGLIDE_HOME, repository copy in $repo"

pg-queue --team "$team" add - <"$demo_data/tasks.jsonl" >/dev/null
echo "demo: queued $(wc -l <"$demo_data/tasks.jsonl") tasks; starting $workers pg-loop workers under pg-monitor"
echo

status=0
pg-monitor run --team "$team" --workers "$workers" --interval 1s --max-restarts 2 "${monitor_flags[@]}" -- \
	pg-loop --team "$team" --model "$model" -C "$repo" "${loop_flags[@]}" >"$work/monitor.out" || status=$?
echo
pg-dash --team "$team" --once || true
echo

if ! grep -qx '<POWERGLIDE_DONE>' "$work/monitor.out"; then
	echo "demo: pg-monitor exited $status without <POWERGLIDE_DONE>; the team files are in $POWERGLIDE_HOME/teams/$team" >&2
	tail -n 20 "$work/monitor.out" >&2 || true
	exit 1
fi
# Drained. pg-monitor exits 1 when a task failed (failure is not success):
# say which, and why when the recording is stale.
if ! failed=$(pg-queue --team "$team" list --status failed --json) || [ -n "$failed" ]; then
	echo "demo: some tasks failed:" >&2
	echo "$failed" >&2
	if grep -q "no recorded call matches" <<<"$failed"; then
		echo "demo: the recording no longer matches what the workers send (a changed system prompt, AGENTS.md, task or tool list);" >&2
		echo "demo: re-record it with 'make demo-record' and commit testdata/demo/session.jsonl" >&2
	fi
	exit 1
fi
if [ "$status" -ne 0 ]; then
	echo "demo: pg-monitor exited $status; the team files are in $POWERGLIDE_HOME/teams/$team" >&2
	exit 1
fi

echo "demo: the repository's own tests, after the swarm:"
(cd "$repo" && go test -count=1 ./...)
if command -v git >/dev/null; then
	echo
	git -C "$repo" add -A && git -C "$repo" --no-pager diff --cached --stat
fi

if [ "$mode" = record ]; then
	cp "$work/session.jsonl" "$session"
	echo "demo: recorded $(wc -l <"$session") model calls into testdata/demo/session.jsonl"
fi
echo
echo "demo: done. Look around: POWERGLIDE_HOME=$POWERGLIDE_HOME $bin/pg-dash --team $team"
echo "demo: the files stay in $work; remove them with: rm -rf $work"
