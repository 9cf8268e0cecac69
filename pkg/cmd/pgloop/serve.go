package pgloop

import (
	"fmt"
	"time"

	"github.com/alecthomas/kong"
	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/loop"
)

// ServeCmd runs one session as a coprocess driven by JSON Lines commands.
//
//	$ pg-loop serve --ask 'bash:git push*' < commands.jsonl
//	$ coproc pg-loop serve; echo '{"type":"prompt","id":"1","message":"fix the build"}' >&${COPROC[1]}
type ServeCmd struct {
	RunCmd `embed:""`
}

// Run serves until shutdown or the end of stdin.
func (s *ServeCmd) Run(rt *cli.Runtime, kctx *kong.Context) error {
	s.serving = true
	s.JSON = true
	return s.RunCmd.Run(rt, kctx)
}

// control is the run's serve handle; task ids go on from a resumed
// session's.
func (c *RunCmd) control(replay *loop.Replay) *loop.Control {
	used := map[string]bool{}
	if replay != nil {
		for id := range replay.Ended {
			used[id] = true
		}
		if replay.Current != nil {
			used[replay.Current.ID] = true
		}
	}
	return loop.NewControl(used)
}

// serveCommands reads the commands in the background: the runner waits
// for their tasks.
func (c *RunCmd) serveCommands(rt *cli.Runtime, ctl *loop.Control, r *loop.Runner, ev *loop.Emitter) {
	ctl.Attach(r)
	go func() {
		if err := ctl.Commands(rt.IO.In, ev, time.Now); err != nil {
			fmt.Fprintf(rt.IO.Err, "pg-loop: warning: %v\n", err)
		}
	}()
}

// Help is the detailed help of the command (--help and the man page).
func (ServeCmd) Help() string {
	return `pg-loop serve runs one session as a coprocess: it reads commands on stdin, one JSON object a line, and writes the loop's events on stdout (JSON Lines, the same events pg-loop prints), each command answered by a reply record {type:"reply", id, command, ok, error, task, state} carrying the command's id. Every task of the session follows up on the conversation before it.

Commands ({"type":..., "id":...}):
  prompt     {"message", "verify"}: start a task (refused while one runs)
  follow_up  {"message", "verify"}: queue a task for after the current one (started at once when idle)
  steer      {"message"}: add a message to the current task before its next model call
  abort      cancel the current task's step (it fails "aborted"); the session goes on
  approve    {"call"}: run a call waiting for approval
  deny       {"call", "reason"}: refuse it; the model reads the reason
  state      reply with the state: loop state, task, step, queued follow-ups, pending approvals, usage
  shutdown   abort the current task and cancel the queued ones (a task event each: status cancelled), end the session (summary, <POWERGLIDE_DONE>, exit 0)

At the end of stdin the current and queued tasks still run, then the session ends: to run prompts and stop, close stdin rather than send shutdown. With --ask PATTERN, a matching tool call emits an approval event (status pending, the call and its id) and waits for approve or deny; after the end of stdin, calls that need approval are denied. A malformed line gets an error record naming it; the session goes on. The schema of a command: pg-loop schema serve-command.

  $ printf '%s\n' '{"type":"prompt","id":"1","message":"add a test for the parser"}' '{"type":"follow_up","id":"2","message":"now run go vet"}' | pg-loop serve
  $ pg-loop serve --ask 'bash:git push*' --ask 'write:*.env'`
}
