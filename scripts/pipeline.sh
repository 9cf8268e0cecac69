#!/usr/bin/env bash
# pipeline.sh: run a pagent-style stage pipeline (architect → qa → security →
# implementer → verifier) on a repository with pg-loop --pipeline. Run with
# --help for the details.
set -euo pipefail

prog=pipeline.sh
here=$(cd "$(dirname "$0")" && pwd)
usage() {
	cat <<'EOF'
Usage: pipeline.sh [options] REPO FEATURE [-- PG-LOOP-ARGS...]

Run a stage pipeline on the repository REPO to build FEATURE (a sentence):
by default testdata/pipelines/feature.json, whose stages are

  architect    writes docs/plan/PLAN.md (at least 20 lines)
  qa           writes failing tests and docs/plan/TESTS.md, then promises TESTS_WRITTEN
  security     reviews the plan into docs/plan/SECURITY.md
  implementer  works until the test command passes and it promises IMPLEMENTED
  verifier     checks the work and writes docs/plan/VERIFIED.md

Each stage runs pg-loop iterations with a fresh context until its exit
condition holds (files with enough lines, a promise, a command exiting 0, jq
over the pipeline state), at most its max_iterations. The progress is kept
under $POWERGLIDE_HOME/pipelines/, so running the same command again after a
failure or Ctrl-C resumes at the stage that did not finish; --reset starts
over.

Options:
  -p, --pipeline FILE   the pipeline (default: testdata/pipelines/feature.json
                        of this repository)
  -T, --test-cmd CMD    the project's test command, {{test_cmd}} in the
                        prompts and the implementer's exit condition
                        (default: make test)
  -m, --model ID        model id or fallback chain (pg-loop --model); a
                        replay/FILE path is made absolute
      --var K=V         another pipeline variable (repeatable)
      --commit          commit each stage's work with git (pg-loop --commit)
      --reset           start the pipeline over instead of resuming it
  -h, --help            this help

Everything after -- goes to pg-loop. The tools are taken from PATH, else from
the bin/ directory next to this script (make build).

Exit status: pg-loop's: 0 when every stage's exit condition held, 4 when a
stage used up its iterations (or another limit stopped it), 1 on a failure,
2 on a usage error, 130 on Ctrl-C (run again to resume).

Examples:
  scripts/pipeline.sh ~/src/app 'rate limiting for the login endpoint' -T 'go test ./...'
  # keyless, with the recorded session that builds a hello.sh:
  scripts/pipeline.sh -m replay/testdata/pipelines/feature-replay.jsonl \
      -T 'sh test_hello.sh' /tmp/hello 'a hello.sh that prints hello, world'
EOF
}

die() { # die CODE MESSAGE
	echo "$prog: error: $2" >&2
	exit "$1"
}

pipeline=$here/../testdata/pipelines/feature.json
test_cmd="make test"
model=
extra=()
pos=()
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage; exit 0 ;;
	-p | --pipeline) [ $# -ge 2 ] || die 2 "$1 needs a value"; pipeline=$2; shift 2 ;;
	--pipeline=*) pipeline=${1#*=}; shift ;;
	-T | --test-cmd) [ $# -ge 2 ] || die 2 "$1 needs a value"; test_cmd=$2; shift 2 ;;
	-t) die 2 "-t is --team in the other tools; the test command is -T CMD or --test-cmd CMD" ;;
	--test-cmd=*) test_cmd=${1#*=}; shift ;;
	-m | --model) [ $# -ge 2 ] || die 2 "$1 needs a value"; model=$2; shift 2 ;;
	--model=*) model=${1#*=}; shift ;;
	--var) [ $# -ge 2 ] || die 2 "$1 needs a value"; extra+=(--var "$2"); shift 2 ;;
	--var=*) extra+=(--var "${1#*=}"); shift ;;
	--commit) extra+=(--commit); shift ;;
	--reset) extra+=(--pipeline-reset); shift ;;
	--) shift; break ;;
	-*) die 2 "unknown option $1 (see --help)" ;;
	*) pos+=("$1"); shift ;;
	esac
done
[ ${#pos[@]} -eq 2 ] || die 2 "want REPO and FEATURE, got ${#pos[@]} arguments (see --help)"
repo=${pos[0]}
feature=${pos[1]}
[ -n "$feature" ] || die 2 "FEATURE is empty"
[ -f "$pipeline" ] || die 2 "pipeline $pipeline not found"
mkdir -p "$repo" || die 1 "cannot create $repo"
repo=$(cd "$repo" && pwd)
pipeline=$(cd "$(dirname "$pipeline")" && pwd)/$(basename "$pipeline")
if [ -n "$model" ]; then
	case "$model" in
	replay/*) f=${model#replay/}; [ -f "$f" ] || die 2 "replay file $f not found"
		model=replay/$(cd "$(dirname "$f")" && pwd)/$(basename "$f") ;;
	esac
	extra+=(--model "$model")
fi

if ! command -v pg-loop >/dev/null 2>&1 && [ -x "$here/../bin/pg-loop" ]; then
	PATH="$(cd "$here/../bin" && pwd):$PATH"
	export PATH
fi
for t in pg-loop pg-llm pg-tool; do
	command -v "$t" >/dev/null 2>&1 || die 1 "$t not found on PATH or in $here/../bin: run make build (or make install)"
done

echo "$prog: $(basename "$pipeline") on $repo: $feature" >&2
exec pg-loop --pipeline "$pipeline" -C "$repo" \
	--var "feature=$feature" --var "test_cmd=$test_cmd" "${extra[@]}" "$@"
