#!/bin/sh
# worker.sh TEAM N [PG-LOOP-ARGS...]: one run of pg-loop worker N of TEAM,
# for cron (see crontab.example): it works tasks from the team's queue until
# none is left, appending its loop events to
# $POWERGLIDE_HOME/teams/TEAM/logs/worker-N.jsonl and its diagnostics to
# worker-N.jsonl.stderr, where pg-dash and `tail -f` find them. Run it under
# `flock -n LOCK` so that runs never overlap. Exit status: pg-loop's (0 when
# the queue is empty, 1 on a failure, 4 when a limit stopped a task); 2 on a
# usage error.
set -eu
if [ $# -lt 2 ]; then
	echo "usage: worker.sh TEAM N [PG-LOOP-ARGS...]" >&2
	exit 2
fi
team=$1 n=$2
shift 2
if ! command -v pg-loop >/dev/null 2>&1; then
	echo "worker.sh: error: pg-loop not found on PATH ($PATH): set PATH in the crontab" >&2
	exit 1
fi
logs=${POWERGLIDE_HOME:-$HOME/.powerglide}/teams/$team/logs
mkdir -p "$logs"
exec pg-loop --team "$team" --worker "$n" "$@" >>"$logs/worker-$n.jsonl" 2>>"$logs/worker-$n.jsonl.stderr"
