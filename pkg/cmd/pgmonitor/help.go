package pgmonitor

// Detailed help of the commands (kong's HelpProvider): shown by --help
// and in the man page. The examples run as written, in order, against the
// team web (shell-llm.sh, a model in sh and jq, is in the repository:
// scripts/swap/); those that call a model are marked "with a key".

// Help details run.
func (c *RunCmd) Help() string {
	return `Each worker run spawns is marked as the team's worker in $POWERGLIDE_HOME/run/workers until it is reaped, so a stale one can be stopped even before its first heartbeat.

Examples:
  $ pg-queue add --team web 'echo one' && pg-queue add --team web 'echo two'
  $ pg-monitor run --team web --workers 2 -- pg-loop --llm scripts/swap/shell-llm.sh
  $ pg-monitor run --team web --workers 4 --budget-usd 5 -- pg-loop   # with a key
  $ pg-monitor run --store postgres://db/pg --team web -n 4 --worker-prefix "$(hostname)-" -- pg-loop   # with a key`
}

// Help details watch.
func (c *WatchCmd) Help() string {
	return `The watch signals only workers that carry their worker mark in its own data root ($POWERGLIDE_HOME/run/workers): give it the POWERGLIDE_HOME the workers run with.

Examples:
  $ pg-monitor watch --team web
  $ pg-monitor watch --team web --once   # from cron: * * * * *`
}

// Help details beat.
func (c *BeatCmd) Help() string {
	return `The recorded pid is the process the watcher stops (SIGTERM, then SIGKILL to its process group) when the heartbeat goes stale: the worker script's own shell, $$, or by default the parent of pg-monitor (the script that runs it). Beat also marks that process as the team's worker in $POWERGLIDE_HOME/run/workers/<pid>-<start> (0600, in a 0700 directory): a watcher signals a recorded pid only when it carries that mark in the watcher's own data root, so a record written elsewhere (another user of a shared store, a hand edit) can never make it signal another process. Everything is checked before anything is written, and nonsense exits 2 leaving no file: a pid of 1 or below, a pid that does not exist, a process of another user (its real uid is not the caller's), a login shell (a terminal's session leader: beat typed at a prompt), an ancestor outside the caller's session; a negative, NaN or infinite --cost-usd; a negative --step; an empty --state; control characters.

Examples, in a worker script:
  $ pg-monitor beat --team web --worker 3 --state executing --task t-12
  $ while sleep 10; do pg-monitor beat --team web --worker 3 --pid $$ --every 10s; done &`
}

// Help details status.
func (c *StatusCmd) Help() string {
	return `Examples:
  $ pg-monitor status --team web
  $ pg-monitor status --team web --jq 'select(.type == "worker_status" and .liveness != "alive") | .worker'
  $ pg-monitor status --team web --jq 'select(.type == "team_budget") | [.spent_usd, .reserved_usd]'`
}
