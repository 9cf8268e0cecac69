package pgloop

import (
	"errors"
	"os"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store/dial"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// ApproveCmd answers the approval a team worker waits on.
type ApproveCmd struct {
	Team   string `help:"The team (default: the config key team, env POWERGLIDE_TEAM)." placeholder:"T"`
	Store  string `help:"Where the team's state lives (as pg-loop --store): the answer goes there, so on a shared store any host answers any worker." config:"store" env:"POWERGLIDE_STORE" placeholder:"URL"`
	Worker string `arg:"" help:"The worker waiting." placeholder:"WORKER"`
	Call   string `arg:"" help:"The id of the call it waits on (pg-dash shows it; so do worker-<n>.json's approval.call and the approval event)." placeholder:"CALL"`
	Deny   bool   `help:"Deny the call instead: it is not run, and the model reads why."`
	Reason string `help:"Why, for the model (with --deny)." placeholder:"TEXT"`
}

// Run writes the answer for the worker to pick up.
func (a *ApproveCmd) Run(rt *cli.Runtime) error {
	cfg, err := rt.Config()
	if err != nil {
		return err
	}
	team := a.Team
	if team == "" {
		team = cfg.String("team")
	}
	if _, err := teamdir.New(cfg.String("home"), team); err != nil {
		return cli.Usagef("%v", err)
	}
	if err := teamdir.ValidName("worker", a.Worker); err != nil {
		return cli.Usagef("%v", err)
	}
	st, tm, err := dial.Team(rt.Ctx, cfg, storeOptions(rt, cfg), team)
	if err != nil {
		return err
	}
	defer st.Close()
	ans := protocol.ApprovalAnswer{Worker: a.Worker, Call: a.Call, Approved: !a.Deny, Reason: a.Reason, By: "pg-loop approve", TS: time.Now().UTC()}
	switch err := tm.Workers().Answer(rt.Ctx, ans); {
	case errors.Is(err, os.ErrNotExist):
		return cli.Usagef("team %s has no worker %s", team, a.Worker)
	case errors.Is(err, teamdir.ErrNoApproval):
		return cli.Nothingf("%v", err)
	case err != nil:
		return cli.Failf("approve", "worker %s: %v", a.Worker, err)
	}
	rt.JSON = true
	ans.Type = "approval_answer"
	return jsonl.NewEncoder(rt.IO.Out).Encode(ans)
}

// Help is the detailed help of the command (--help and the man page).
func (ApproveCmd) Help() string {
	return `A team worker started with --ask PATTERN that reaches a matching call writes it into its worker record (worker-<n>.json: approval {call, tool, input, pattern, since}) and waits. pg-loop approve answers it: it checks the worker waits on that call, stores the answer in the team's store (worker-<n>.approval in the team directory; the workers row on PostgreSQL, so any host answers any worker), and prints it as a JSON line {type:"approval_answer", worker, call, approved, reason, by, ts}; the worker picks it up within a fraction of a second. pg-dash's y and n keys do the same. Exit 3 when the worker waits on no call, or on another one; 2 for an unknown team or worker; 1 when the store cannot be written.

  $ pg-loop approve --team web 3 call_7_1
  $ pg-loop approve --team web 3 call_7_1 --deny --reason 'no pushes on Fridays'`
}
