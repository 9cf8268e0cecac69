#!/bin/sh
# worker.sh: a shell worker for pg-monitor's tests. It beats with
# `pg-monitor beat`, claims tasks from $QUEUE (a pg-queue command) and
# completes them, and prints <POWERGLIDE_DONE> when nothing is left. On a
# task's first attempt (attempts counts claims) its id picks a misbehaviour:
#   hang-*      stop beating and sleep forever
#   crash-*     exit 1 while holding the claim
#   stubborn-*  ignore SIGTERM and hang
# $WORKER_COST, when set, is reported as the worker's spending.
set -u
Q="${QUEUE:?}"
beat() { pg-monitor beat --pid $$ ${WORKER_COST:+--cost-usd "$WORKER_COST"} "$@"; }
beat --state idle
# Heartbeats come from a background loop, as pg-loop beats from a goroutine.
( while kill -0 $$ 2>/dev/null; do beat; sleep 0.5; done ) &
beater=$!
while :; do
	out=$($Q --team "$POWERGLIDE_TEAM" claim --worker "$POWERGLIDE_WORKER") && rc=0 || rc=$?
	if [ "$rc" = 3 ]; then
		kill $beater
		beat --state done --task ""
		echo '<POWERGLIDE_DONE>'
		exit 0
	fi
	[ "$rc" = 0 ] || exit 1
	set -- $(printf '%s' "$out" | jq -r '"\(.id) \(.claim.token) \(.attempts)"')
	id=$1 tok=$2 att=$3
	beat --state executing --task "$id"
	echo "{\"type\":\"claimed\",\"task\":\"$id\",\"worker\":\"$POWERGLIDE_WORKER\",\"attempts\":$att}"
	if [ "$att" = 1 ]; then
		case $id in
		hang-*)
			kill $beater
			sleep 100000 ;;
		crash-*) exit 1 ;;
		stubborn-*)
			kill $beater
			trap '' TERM
			while :; do sleep 1; done ;;
		esac
	fi
	$Q --team "$POWERGLIDE_TEAM" complete "$id" --token "$tok" || exit 1
	echo "{\"type\":\"completed\",\"task\":\"$id\",\"worker\":\"$POWERGLIDE_WORKER\"}"
	beat --state pick_task --task ""
done
