package pgqueue

// Detailed help of the commands that have no more to say than their
// examples (kong's HelpProvider): shown by --help and in the man page.
// Each example runs as written, in order, against the team web.

// Help details add.
func (c *AddCmd) Help() string {
	return `Prints the added tasks, one JSON line each. Tasks read from stdin are added all together or not at all.

Examples:
  $ pg-queue add --team web 'fix the flaky test' --id flaky --priority 5 --verify 'go test ./...'
  $ pg-queue add --team web 'deploy' --id deploy --depends-on flaky --label area=ops
  $ printf '%s\n' '{"title":"write the docs"}' '{"title":"tag the release","priority":1}' | pg-queue add --team web -`
}

// Help details claim.
func (c *ClaimCmd) Help() string {
	return `Prints the claimed task, with the fencing token (.claim.token) that renew, complete, fail and release ask for; exits 3 when there is nothing to claim.

Examples:
  $ task=$(pg-queue claim --team web --worker 3 --lease 10m --wait 30s) || exit
  $ id=$(jq -r .id <<<"$task"); token=$(jq -r .claim.token <<<"$task")`
}

// Help details renew.
func (c *RenewCmd) Help() string {
	return `Fails (exit 1) when the claim was lost: the lease ran out and the task went to another worker.

Examples (id and token as pg-queue claim --help sets them):
  $ pg-queue renew --team web "$id" --token "$token" --lease 20m`
}

// Help details complete.
func (c *CompleteCmd) Help() string {
	return `Examples (id and token as pg-queue claim --help sets them):
  $ pg-queue complete --team web "$id" --token "$token" --result '{"commit":"abc123"}'
  $ echo '{"tests":42}' | pg-queue complete --team web "$id" --token "$token" --result -`
}

// Help details fail.
func (c *FailCmd) Help() string {
	return `Examples (id and token as pg-queue claim --help sets them):
  $ pg-queue fail --team web "$id" --token "$token" --error 'tests still fail' --retry`
}

// Help details release.
func (c *ReleaseCmd) Help() string {
	return `Examples (id and token as pg-queue claim --help sets them):
  $ pg-queue release --team web "$id" --token "$token"
  $ mark=$(pg-queue stats --team web --jq .next_token)   # when worker 3 stopped
  $ pg-queue release --team web --worker 3 --before-token "$mark" --reason 'worker stopped'`
}

// Help details cancel.
func (c *CancelCmd) Help() string {
	return `Examples:
  $ pg-queue cancel --team web deploy --reason 'superseded'`
}

// Help details list.
func (c *ListCmd) Help() string {
	return `Examples:
  $ pg-queue list --team web --status pending,blocked
  $ pg-queue list --team web --status done --jq .id -r | wc -l
  $ pg-queue list --team web --live --jq 'select(.priority > 0) | .id' -r`
}

// Help details show.
func (c *ShowCmd) Help() string {
	return `Examples:
  $ pg-queue show --team web flaky
  $ pg-queue show --team web flaky | jq .result`
}

// Help details stats.
func (c *StatsCmd) Help() string {
	return `Examples:
  $ pg-queue stats --team web
  $ pg-queue stats --team web --jq .drained`
}

// Help details archive.
func (c *ArchiveCmd) Help() string {
	return `Examples:
  $ pg-queue archive --team web --older-than 24h`
}

// Help details prune.
func (c *PruneCmd) Help() string {
	return `Examples:
  $ pg-queue prune --team web --older-than 168h`
}
