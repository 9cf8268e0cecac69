package pgloop

// Detailed help of run and sessions (kong's HelpProvider): shown by
// --help and in the man page. The examples that call a model are marked
// "with a key"; the others run as written (shell-llm.sh, a model in sh and
// jq, is in the repository: scripts/swap/).

// Help details run, the default command.
func (c *RunCmd) Help() string {
	return `pg-loop --task X is pg-loop run --task X: the tool's description (pg-loop --help) tells the whole loop.

Examples:
  $ pg-loop --task 'make the tests pass' --verify 'go test ./...' --commit   # with a key
  $ pg-loop --llm scripts/swap/shell-llm.sh -C /tmp --task 'echo hi > hi.txt' --verify 'test -s hi.txt'
  $ pg-loop --llm scripts/swap/shell-llm.sh --session-id greet --task 'echo hello'
  $ pg-loop --llm scripts/swap/shell-llm.sh --resume greet --task 'echo again'
  $ pg-loop --llm scripts/swap/shell-llm.sh --fork greet --session-id greet2 --task 'echo forked'
  $ pg-loop --team web --worker 3   # with a key: claims tasks from pg-queue until none is left`
}

// Help details sessions.
func (c *SessionsCmd) Help() string {
	return `Examples:
  $ pg-loop sessions
  $ pg-loop sessions show greet`
}

// Help details sessions list.
func (c *SessionsListCmd) Help() string {
	return `Examples:
  $ pg-loop sessions
  $ pg-loop sessions --jq 'select(.status != "done") | .id' -r
  $ pg-loop sessions --jq 'select(.parent == "greet") | .id' -r`
}

// Help details sessions show.
func (c *SessionsShowCmd) Help() string {
	return `Examples:
  $ pg-loop sessions show greet
  $ pg-loop sessions show greet --json | jq -r 'select(.kind == "message") | .message.role'`
}
