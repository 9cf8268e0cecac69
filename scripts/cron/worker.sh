#!/bin/sh
# worker.sh TEAM N [PG-LOOP-ARGS...]: one run of pg-loop worker N of TEAM,
# for cron (see crontab.example): it works tasks from the team's queue until
# none is left, appending its loop events to
# DATA-ROOT/teams/TEAM/logs/worker-N.jsonl and its diagnostics to
# worker-N.jsonl.stderr, where pg-dash and `tail -f` find them. Run it under
# `flock -n LOCK` so that runs never overlap. Exit status: pg-loop's (0 when
# the queue is empty, 1 on a failure, 4 when a limit stopped a task); 2 on a
# usage error.
set -eu
# What the tools write is private to the user (docs/team-dir.md): the data
# root, team and log directories this script may be the first to create,
# and the logs it opens, as pg-loop would make them (0700 and 0600).
umask 077
if [ $# -lt 2 ]; then
	echo "usage: worker.sh TEAM N [PG-LOOP-ARGS...]" >&2
	exit 2
fi
team=$1 n=$2
shift 2
for tool in pg-loop pg-queue; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "worker.sh: error: $tool not found on PATH ($PATH): set PATH in the crontab" >&2
		exit 1
	fi
done
# The data root as the tools resolve it (env > config file > ~/.powerglide),
# so the log lands in the team directory pg-loop itself uses.
home=$(pg-queue config --json | sed -n 's/.*"key":"home","value":"\([^"]*\)".*/\1/p')
if [ -z "$home" ]; then
	echo "worker.sh: error: could not resolve the data root (pg-queue config)" >&2
	exit 1
fi
logs=$home/teams/$team/logs
mkdir -p "$logs"
exec pg-loop --team "$team" --worker "$n" "$@" >>"$logs/worker-$n.jsonl" 2>>"$logs/worker-$n.jsonl.stderr"
