#!/usr/bin/env bash
# swarm.sh: start a team from a tasks file, with N pg-loop workers under
# pg-monitor and the pg-dash dashboard. Run with --help for the details.
set -euo pipefail

prog=swarm.sh
usage() {
	cat <<'EOF'
Usage: swarm.sh [options] TASKS.jsonl [-- PG-LOOP-ARGS...]
       swarm.sh [options] --no-add --team T [-- PG-LOOP-ARGS...]
       swarm.sh --store postgres://... [options] ...

Start a team: add the tasks of TASKS.jsonl (JSON Lines, one task record a
line, as `pg-queue add -` reads them; - for stdin) to the team's queue, run
`pg-monitor run --team T --workers N -- pg-loop --team T PG-LOOP-ARGS...` in
the background, and show the team:

  - on a terminal, `pg-dash --team T` opens; quitting it (q) leaves the swarm
    running and swarm.sh waits for it (Ctrl-C then stops it);
  - otherwise (or with --no-dash) swarm.sh waits and prints
    `pg-dash --team T --once` at the end.

Ctrl-C (or SIGTERM) stops the swarm cleanly: pg-monitor stops every worker
(SIGTERM, then SIGKILL after its grace period) and releases their tasks to
the queue, so a later run picks them up again.

With --store URL (or POWERGLIDE_STORE) the team's state (tasks, journal,
worker records, budget) lives in that store instead of the team directory:
with a PostgreSQL URL, swarm.sh on several machines runs one team. Start it
with the tasks on one machine and with --no-add on the others, each with its
own --worker-prefix so that no two workers share a name (README.md, "Across
machines"). The logs stay in the team directory of each machine.

The monitor's output goes to $POWERGLIDE_HOME/teams/T/logs/monitor.log, a
text file: its actions and diagnostics as lines "pg-monitor: worker N: ...",
then <POWERGLIDE_DONE> or <POWERGLIDE_ERROR> last. The same actions as JSON
records are in the team's events.jsonl (pg-queue --team T watch); each
worker's loop events go to logs/worker-<n>.jsonl next to monitor.log
(pg-monitor writes those).

Options:
  -t, --team T       team name (default: $POWERGLIDE_TEAM, else the tasks
                     file's name without .jsonl)
  -n, --workers N    number of workers (default 3)
  -C, --workdir DIR  the repository the workers work in (pg-loop -C; default .)
  -m, --model ID     model id or fallback chain for every worker (pg-loop --model)
  -s, --store URL    where the team's state lives (default: $POWERGLIDE_STORE,
                     else the configuration's store, else the team directory):
                     file: or postgres://user@host/db (PG* variables apply);
                     given to pg-queue, pg-monitor, pg-loop and pg-dash
  -p, --worker-prefix P
                     name the workers P1..PN (pg-monitor run --worker-prefix):
                     a prefix of its own on each machine that shares a store
      --no-dash      never open the dashboard; print the snapshot at the end
      --no-add       add nothing: run the tasks already in team T's queue
                     (to resume a swarm stopped with Ctrl-C; the tasks of a
                     file cannot be added twice, their ids exist)
  -h, --help         this help

Everything after -- goes to every pg-loop worker, e.g.
  -- --verify 'go test ./...' --commit
  -- --llm-serve 'pg-llm serve --model replay/session.jsonl'
  -- --llm "$PWD/scripts/swap/shell-llm.sh"

The tools are taken from PATH, else from the bin/ directory next to this
script (make build). pg-monitor's limits come from its configuration
(POWERGLIDE_MONITOR_STALE, _STALL, _GRACE, _INTERVAL; see pg-monitor run
--help).

Exit status: pg-monitor's: 0 when the queue is drained and every task of
the run is done; 1 when a task failed (failure is not success, the rule of
a lone pg-loop too), tasks are left or a worker was given up; 4 when a
budget stopped the team; 2 on a usage error or bad tasks (nothing added);
130/143 when stopped by Ctrl-C or SIGTERM.

Examples:
  scripts/swarm.sh -n 3 tasks.jsonl -- --verify 'go test ./...' --commit
  scripts/swarm.sh -n 3 --no-add --team tasks -- --verify 'go test ./...' --commit
  scripts/swarm.sh --team web -C ~/src/web --no-dash tasks.jsonl
  scripts/swarm.sh --store postgres://pg@db/pg -p a- --team web tasks.jsonl    # machine A
  scripts/swarm.sh --store postgres://pg@db/pg -p b- --team web --no-add       # machine B
EOF
}

die() { # die CODE MESSAGE
	echo "$prog: error: $2" >&2
	exit "$1"
}

team=${POWERGLIDE_TEAM:-}
workers=3
workdir=
model=
store=
prefix=
dash=auto
add=yes
tasks=
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage; exit 0 ;;
	-t | --team) [ $# -ge 2 ] || die 2 "$1 needs a value"; team=$2; shift 2 ;;
	--team=*) team=${1#*=}; shift ;;
	-n | --workers) [ $# -ge 2 ] || die 2 "$1 needs a value"; workers=$2; shift 2 ;;
	--workers=*) workers=${1#*=}; shift ;;
	-C | --workdir) [ $# -ge 2 ] || die 2 "$1 needs a value"; workdir=$2; shift 2 ;;
	--workdir=*) workdir=${1#*=}; shift ;;
	-m | --model) [ $# -ge 2 ] || die 2 "$1 needs a value"; model=$2; shift 2 ;;
	--model=*) model=${1#*=}; shift ;;
	-s | --store) [ $# -ge 2 ] || die 2 "$1 needs a value"; store=$2; [ -n "$store" ] || die 2 "$1 needs a value"; shift 2 ;;
	--store=*) store=${1#*=}; [ -n "$store" ] || die 2 "--store needs a value"; shift ;;
	-p | --worker-prefix) [ $# -ge 2 ] || die 2 "$1 needs a value"; prefix=$2; shift 2 ;;
	--worker-prefix=*) prefix=${1#*=}; shift ;;
	--no-dash) dash=no; shift ;;
	--no-add) add=no; shift ;;
	--) shift; break ;;
	-) [ -z "$tasks" ] || die 2 "more than one tasks file"; tasks=-; shift ;;
	-*) die 2 "unknown option $1 (see --help)" ;;
	*) [ -z "$tasks" ] || die 2 "more than one tasks file: $tasks and $1 (pg-loop arguments go after --)"; tasks=$1; shift ;;
	esac
done
loop_args=("$@")

if [ "$add" = no ]; then
	[ -z "$tasks" ] || die 2 "--no-add takes no tasks file"
	[ -n "$team" ] || die 2 "--no-add needs --team (or POWERGLIDE_TEAM)"
else
	[ -n "$tasks" ] || die 2 "no tasks file (see --help)"
	[ "$tasks" = - ] || [ -f "$tasks" ] || die 2 "tasks file $tasks not found"
fi
case "$workers" in
'' | *[!0-9]* | 0) die 2 "--workers wants a whole number of at least 1, got '$workers'" ;;
esac
if [ -z "$team" ]; then
	[ "$tasks" != - ] || die 2 "give --team when the tasks come from stdin"
	team=$(basename "$tasks")
	team=${team%.jsonl}
	team=${team%.json}
fi
if [ -n "$workdir" ]; then
	[ -d "$workdir" ] || die 2 "workdir $workdir is not a directory"
	workdir=$(cd "$workdir" && pwd)
	loop_args=(-C "$workdir" "${loop_args[@]}")
fi
[ -z "$model" ] || loop_args=(--model "$model" "${loop_args[@]}")
# The store: every tool below, and the workers pg-monitor starts, read it
# from the environment.
if [ -n "$store" ]; then
	POWERGLIDE_STORE=$store
	export POWERGLIDE_STORE
fi

# The tools: PATH first, else the repository's bin/ (make build).
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v pg-monitor >/dev/null 2>&1 && [ -x "$here/../bin/pg-monitor" ]; then
	PATH="$(cd "$here/../bin" && pwd):$PATH"
	export PATH
fi
for t in pg-queue pg-monitor pg-loop pg-dash pg-llm pg-tool; do
	command -v "$t" >/dev/null 2>&1 || die 1 "$t not found on PATH or in $here/../bin: run make build (or make install)"
done

# The team directory, as the tools resolve it (flags > env > config file):
# the team's state unless a store holds it, and its logs in any case.
home=$(pg-queue config | sed -n 's/.*"key":"home","value":"\([^"]*\)".*/\1/p')
[ -n "$home" ] || die 1 "could not resolve the data root (pg-queue config)"
dir="$home/teams/$team"
store=$(pg-queue config | sed -n 's/.*"key":"store","value":"\([^"]*\)".*/\1/p')
case "$store" in
'' | file:) where=$dir ;;
file:*) where="${store#file:}/teams/$team" ;;
*) where="its PostgreSQL store" ;; # not the URL: it may hold a password
esac

if [ "$add" = yes ]; then
	# Add the tasks: all or nothing; pg-queue names a bad line and exits 2.
	added=$(if [ "$tasks" = - ]; then pg-queue --team "$team" add -; else pg-queue --team "$team" add - <"$tasks"; fi) ||
		die $? "the tasks were not added (nothing changed)"
	n=$(printf '%s\n' "$added" | grep -c '^{' || true)
	if [ "$n" = 1 ]; then w=task; else w=tasks; fi
	echo "$prog: added $n $w to team $team ($where)" >&2
else
	stats=$(pg-queue --team "$team" stats --jq 'if .live + .archived == 0 then "" else "\(.pending) pending, \(.claimed) claimed, \(.done) done" end' -r) ||
		die 1 "could not read team $team's queue ($where)"
	[ -n "$stats" ] || die 1 "team $team has no tasks in $where"
	echo "$prog: team $team ($where): $stats" >&2
fi

mkdir -p "$dir/logs"
log="$dir/logs/monitor.log"
pg-monitor run --team "$team" --workers "$workers" ${prefix:+--worker-prefix "$prefix"} -- pg-loop --team "$team" "${loop_args[@]}" >>"$log" 2>&1 &
mon=$!
if [ "$workers" = 1 ]; then w=worker; else w=workers; fi
echo "$prog: pg-monitor (pid $mon) runs $workers pg-loop $w; log $log" >&2

# shellcheck disable=SC2317 # stop is called from the traps below
stop() { # stop CODE: stop the monitor, which stops the workers and releases their tasks.
	trap '' INT TERM
	echo "$prog: stopping the swarm (pg-monitor stops the workers and releases their tasks)" >&2
	kill -TERM "$mon" 2>/dev/null || true
	wait "$mon" 2>/dev/null || true
	echo "$prog: stopped; unfinished tasks are back in the queue (pg-queue --team $team list --status pending); resume with: $prog --no-add --team $team ..." >&2
	exit "$1"
}
trap 'stop 130' INT
trap 'stop 143' TERM

if [ "$dash" = auto ] && [ -t 0 ] && [ -t 1 ]; then
	pg-dash --team "$team" || true
	if kill -0 "$mon" 2>/dev/null; then
		echo "$prog: dashboard closed; the swarm goes on (Ctrl-C stops it; pg-dash --team $team reopens the dashboard)" >&2
	fi
fi

# `wait` returns early when a trapped signal arrives; the trap then exits.
rc=0
wait "$mon" || rc=$?
trap - INT TERM
echo "$prog: pg-monitor exited $rc: $(tail -n 1 "$log")" >&2
if [ "$dash" != auto ] || ! [ -t 0 ] || ! [ -t 1 ]; then
	pg-dash --team "$team" --once || true
fi
exit "$rc"
