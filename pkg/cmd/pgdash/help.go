package pgdash

// Help details show, the default command (kong's HelpProvider): shown by
// --help and in the man page.
func (c *ShowCmd) Help() string {
	return `pg-dash --team T is pg-dash show --team T: the tool's description (pg-dash --help) tells the views and keys.

Examples (shell-llm.sh, a model in sh and jq, is in the repository: scripts/swap/):
  $ pg-dash --team web
  $ pg-dash --team web --view tasks
  $ pg-dash --team web --once
  $ pg-dash --team web --once --json | jq .counts
  $ pg-loop --llm scripts/swap/shell-llm.sh --task 'echo hi' | pg-dash - --once`
}
