// Package pgmonitor is the command line of pg-monitor: liveness and
// supervision of a team's workers.
package pgmonitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"text/tabwriter"
	"time"

	"github.com/itchyny/gojq"
	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/ledger"
	"github.com/powerglide/powerglide/pkg/monitor"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/dial"
	_ "github.com/powerglide/powerglide/pkg/store/dial/pgdial" // opens PostgreSQL stores itself
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// CLI is pg-monitor's grammar.
type CLI struct {
	cli.Common `embed:""`

	Team     string `help:"Team name: the team directory is $POWERGLIDE_HOME/teams/<team> (default: the team key of the configuration, \"default\")." config:"team" env:"POWERGLIDE_TEAM" placeholder:"T"`
	Store    string `help:"Where the team's state lives: empty or file: (the team directory), file:/path (the one under /path), postgres://... (PostgreSQL, shared by hosts). Workers and pg-queue started by run inherit it (POWERGLIDE_STORE). Logs and the monitor's own state (monitor.json) stay in the team directory on this host." config:"store" env:"POWERGLIDE_STORE" placeholder:"URL"`
	QueueCmd string `name:"queue-cmd" help:"The pg-queue command used to list, release and count tasks (default: pg-queue next to pg-monitor, else on PATH)." config:"queue_cmd" env:"POWERGLIDE_QUEUE_CMD" placeholder:"CMD"`

	Run    RunCmd    `cmd:"" help:"Spawn N workers and supervise them until the queue is drained; exit 0 only when no task of the run failed."`
	Watch  WatchCmd  `cmd:"" help:"Watch workers started elsewhere (cron, by hand): stop stale ones, release dead ones' tasks."`
	Beat   BeatCmd   `cmd:"" help:"Write a heartbeat to worker-<n>.json (for shell-script workers)."`
	Status StatusCmd `cmd:"" help:"List the team's workers with their liveness, heartbeat age, task and usage, then the team budget's spent and reserved (team_budget)."`
}

// Spec describes pg-monitor.
func Spec() *cli.Spec {
	return &cli.Spec{
		Name: "pg-monitor",
		Description: `Spawn, supervise and watch a team of workers.
pg-monitor keeps a swarm honest. Each worker keeps worker-<n>.json in the team directory with a
heartbeat (heartbeat_at), the time of its last progress (progress_at), its pid and the pid's start
time. A worker is alive, stale (heartbeat older than --stale), stuck (heartbeat fresh but no
progress for --stall, and past the deadline of the call it is in, busy_until: pg-loop records one
for a verify run or a turn's tool calls, by their own timeouts), dead (its process is gone, or its
pid was reused) or done (it ended).
Stale and stuck workers get SIGTERM, then SIGKILL of their process group after --grace; a pid is
signalled only while its start time still matches the record, so a reused pid is never killed,
and only when the process carries that worker's mark in this data root,
$POWERGLIDE_HOME/run/workers/<pid>-<pid_start>: pg-loop marks itself, run marks the workers it
spawns and beat the pid it names. A record alone (anyone who can write the store can write one)
never makes pg-monitor signal a process: without the mark it journals a not_signalled action
with the reason, once, and leaves the worker's tasks to their lease. So run the monitor with the
workers' POWERGLIDE_HOME; workers started by an older pg-loop are not signalled. A team
directory that another user could change (the data root, teams/ or the team's directory not yours
or root's, or writable by others) is refused with exit 2 (docs/team-dir.md).
When the worker ends on SIGTERM but members of its group remain, they get SIGKILL after --grace,
only while a member seen before is still alive in the group (so the group id was not reused).
The claimed tasks of a dead worker are released through pg-queue (with their fencing token) at
once. Every action is appended to events.jsonl with its reason.
With --store postgres://... the worker records and the journal live in PostgreSQL, shared by
hosts: each pg-monitor signals only processes of its own host, and reports another host's
workers (stale once their heartbeat is old) without acting on them; their leases expire. A record
is this host's when its host_id (the kernel's boot id and the pid namespace, hashed) is this
process's, so hosts that share a hostname are told apart; a record without one is no host's there
(on the file store: this host's when its host is this hostname or empty). The records' times reach
each reader in its own clock (measured by the server).
A record is acted on only when it names the worker it is stored under (worker-<n>.json holds
"worker":"<n>", a valid name) and its pid_start is a start time as /proc writes it (digits):
others are listed as errors, or their liveness is unknown, and their tasks wait for their leases.

Several watchers may run at once (a run supervisor, cron, a person): a pass holds an flock on
monitor.lock in the team directory and records the kills in flight in monitor.json, so each
action is taken once. A signal is recorded before it is sent and again after: a SIGKILL left
meant but not sent by a watcher killed in between is sent by a later pass, once, 2s (or --grace,
if longer) after it was meant; a SIGKILL that was sent is never repeated.

Failure is not success: run prints <POWERGLIDE_DONE> when the queue is drained (every task
ended), but exits 0 only when none of the tasks the run ended failed and no worker was given up;
otherwise 1, as a lone pg-loop does when one of its tasks failed. The run's tasks are those its
own workers claimed (read from the journal): a task that a worker of another run or host failed
meanwhile does not count. Exit codes: 0 every task of the
run done, 1 a task failed, tasks were left or a worker was given up, 2 usage error, 4 the team
budget stopped the workers with work left, 130/143 a signal.

Examples (shell-llm.sh, a model in sh and jq, is in the repository: scripts/swap/):
  $ pg-queue add --team web 'echo one' && pg-queue add --team web 'echo two'
  $ pg-monitor run --team web --workers 2 -- pg-loop --llm scripts/swap/shell-llm.sh
  $ pg-monitor status --team web
  $ pg-monitor watch --team web --once   # from cron: * * * * *`,
		CLI:     &CLI{},
		Schemas: []string{"worker-status", "worker", "journal-event", "team-budget"},
	}
}

// Limits are the liveness limits shared by run, watch and status.
type Limits struct {
	Stale    string `name:"stale" aliases:"heartbeat" help:"A worker whose heartbeat is older than this is stale, and stopped (default 30s; pg-dash's --stale shows it). --heartbeat is its old name." config:"monitor_heartbeat" env:"POWERGLIDE_MONITOR_STALE,POWERGLIDE_MONITOR_HEARTBEAT" placeholder:"D"`
	Stall    string `help:"A worker whose heartbeat is fresh but that made no progress for this long is stuck (default 10m; 0 disables); one in a call whose own deadline (busy_until: a verify run within --verify-timeout, tool calls within their timeouts) has not passed is not." config:"monitor_stall" env:"POWERGLIDE_MONITOR_STALL" placeholder:"D"`
	Grace    string `help:"Time between SIGTERM and SIGKILL of a worker's process group (default 10s)." config:"monitor_grace" env:"POWERGLIDE_MONITOR_GRACE" placeholder:"D"`
	Interval string `help:"Time between watch passes (default 5s)." config:"monitor_interval" env:"POWERGLIDE_MONITOR_INTERVAL" placeholder:"D"`
}

// setup resolves the team, its store, the limits and the queue command.
// The caller closes the watcher's store (closeStore).
func setup(rt *cli.Runtime, c *CLI) (*monitor.Watcher, time.Duration, error) {
	if err := resolveTeam(rt, c); err != nil {
		return nil, 0, err
	}
	home, err := rt.Home()
	if err != nil {
		return nil, 0, err
	}
	d, err := teamdir.New(home, c.Team)
	if err != nil {
		return nil, 0, cli.Usagef("%v", err)
	}
	cfg, err := rt.Config()
	if err != nil {
		return nil, 0, err
	}
	o := monitor.Options{
		Heartbeat: cfg.Duration("monitor_heartbeat"),
		Stall:     cfg.Duration("monitor_stall"),
		Grace:     cfg.Duration("monitor_grace"),
	}
	interval := cfg.Duration("monitor_interval")
	if o.Heartbeat <= 0 {
		return nil, 0, cli.Usagef("--stale must be positive, got %s", o.Heartbeat)
	}
	if o.Grace < 0 || o.Stall < 0 {
		return nil, 0, cli.Usagef("--grace and --stall cannot be negative")
	}
	if interval <= 0 {
		return nil, 0, cli.Usagef("--interval must be positive, got %s", interval)
	}
	tm, host, err := openTeam(rt, c.Team)
	if err != nil {
		return nil, 0, err
	}
	w := &monitor.Watcher{
		Dir:  d,
		Team: tm,
		Opts: o,
		Host: host,
		Queue: &monitor.CLIQueue{
			Argv: monitor.FindQueueCmd(cfg.String("queue_cmd")),
			Team: c.Team,
			Env:  childEnv(rt, home),
		},
	}
	return w, interval, nil
}

// openTeam opens the configured store and the team in it, and returns
// this host as the store's records see it (store.Shared). The store is
// closed when the command ends (rt.Defer).
func openTeam(rt *cli.Runtime, team string) (store.Team, proc.Host, error) {
	cfg, err := rt.Config()
	if err != nil {
		return nil, proc.Host{}, err
	}
	st, tm, err := dial.Team(rt.Ctx, cfg, dial.Options{}, team)
	if err != nil {
		return nil, proc.Host{}, err
	}
	rt.Defer(func() { st.Close() })
	proc.WarnNoHostID(rt.IO.Err, "pg-monitor")
	host := proc.ThisHost()
	host.Shared = store.Shared(st)
	return tm, host, nil
}

// teamExists is a not_found failure (exit 1) for a team the store does
// not hold.
func teamExists(rt *cli.Runtime, w *monitor.Watcher) error {
	if err := w.Team.Exists(rt.Ctx); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return cli.Failf("not_found", "%v", err)
		}
		return err
	}
	return nil
}

// resolveTeam takes the team from --team, POWERGLIDE_TEAM or the
// configuration, as pg-queue does.
func resolveTeam(rt *cli.Runtime, c *CLI) error {
	cfg, err := rt.Config()
	if err != nil {
		return err
	}
	c.Team = cfg.String("team")
	if c.Team == "" {
		return cli.Usagef("missing --team (or POWERGLIDE_TEAM)")
	}
	return nil
}

// childEnv is the command's environment with the resolved data root and
// store, so pg-queue and the workers see the same team.
func childEnv(rt *cli.Runtime, home string) []string {
	env := append(append([]string{}, rt.IO.Env...), "POWERGLIDE_HOME="+home)
	if cfg, err := rt.Config(); err == nil && cfg.String("store") != "" {
		env = append(env, "POWERGLIDE_STORE="+cfg.String("store"))
	}
	return env
}

// RunCmd spawns and supervises a swarm.
type RunCmd struct {
	Workers     int           `help:"Number of workers to spawn; each gets POWERGLIDE_TEAM and POWERGLIDE_WORKER=<n> (1..N, after --worker-prefix)." required:"" short:"n" placeholder:"N"`
	Prefix      string        `name:"worker-prefix" help:"Start every worker's name with this: <prefix>1..<prefix>N. When several hosts run one team on a shared store (--store postgres://...), give each host its own prefix, so no two workers of the team share a name." env:"POWERGLIDE_WORKER_PREFIX" placeholder:"P"`
	Restart     string        `help:"Restart policy: on-failure restarts a worker that exits without <POWERGLIDE_DONE> (a crash, a signal, <POWERGLIDE_ERROR>), except when a restart cannot help: exit status 2 (usage error or bad input), exit status 4 (a limit of the worker, such as pg-loop's budget) or a last stderr line saying unrecoverable (pg-loop's authentication failure, or a model the provider does not have); always restarts after any exit, while the queue has work; never." enum:"on-failure,always,never" default:"on-failure"`
	MaxRestarts int           `help:"Restarts allowed per worker; -1 for no limit." default:"5" placeholder:"K"`
	Backoff     time.Duration `help:"Delay before a worker's first restart, doubled for each further restart (at most 30s)." default:"1s" placeholder:"D"`
	BudgetUSD   float64       `name:"budget-usd" help:"Team budget in USD, written into the team's ledger (budget.json): every pg-loop worker reserves a model call's estimated cost there before the call and settles its real cost after, and makes no call that could take the team past the budget (it releases its task and exits 4). The spending counts earlier runs of the team. Workers that only report their cost (pg-monitor beat --cost-usd, counted from worker-<n>.json) are all stopped when it reaches the budget. A queue drained at the budget exits 0; workers stopped by it with work left, 4. 0: no budget (clears an earlier run's)." placeholder:"X"`
	Limits      `embed:""`
	Cmd         []string `arg:"" optional:"" passthrough:"" help:"The worker command, after --." placeholder:"CMD"`
}

// Run supervises the swarm. Workers' stdout goes to logs/worker-<n>.jsonl,
// their stderr to logs/worker-<n>.jsonl.stderr.
func (r *RunCmd) Run(rt *cli.Runtime, c *CLI) error {
	if r.Workers < 1 {
		return cli.Usagef("--workers must be at least 1, got %d", r.Workers)
	}
	cmd := r.Cmd
	if len(cmd) > 0 && cmd[0] == "--" {
		cmd = cmd[1:]
	}
	if len(cmd) == 0 {
		return cli.Usagef("missing the worker command: pg-monitor run --team T --workers N -- CMD")
	}
	if r.BudgetUSD < 0 {
		return cli.Usagef("--budget-usd cannot be negative")
	}
	if r.Prefix != "" {
		if err := teamdir.ValidName("worker", r.Prefix+"1"); err != nil {
			return cli.Usagef("--worker-prefix %q: %v", r.Prefix, err)
		}
	}
	if r.MaxRestarts < -1 {
		return cli.Usagef("--max-restarts must be -1 (no limit) or more, got %d", r.MaxRestarts)
	}
	w, interval, err := setup(rt, c)
	if err != nil {
		return err
	}
	home, _ := rt.Home()
	sup := &monitor.Supervisor{W: w, Opts: monitor.RunOptions{
		Workers: r.Workers, Prefix: r.Prefix, Restart: r.Restart, MaxRestarts: r.MaxRestarts, Backoff: r.Backoff,
		Interval: interval, BudgetUSD: r.BudgetUSD, Argv: cmd, Env: childEnv(rt, home), Log: rt.IO.Err,
	}}
	res, err := sup.Run(rt.Ctx)
	if err != nil {
		if rt.Ctx.Err() != nil {
			return err
		}
		var ie *monitor.IntervalError
		if errors.As(err, &ie) {
			fmt.Fprintln(rt.IO.Out, monitor.MarkerError)
			return cli.Usagef("%v", err)
		}
		fmt.Fprintln(rt.IO.Out, monitor.MarkerError)
		return cli.Failf("run", "%v", err)
	}
	switch res.Outcome {
	case monitor.OutcomeDone:
		// Drained: every task ended. Success only if none of the run's
		// failed and no worker was given up (the rule pg-loop follows).
		fmt.Fprintln(rt.IO.Out, monitor.MarkerDone)
		switch {
		case res.Failed > 0:
			return cli.Failf("task", "queue drained, but %d of the %d tasks this run ended failed", res.Failed, res.Failed+res.Done)
		case len(res.GaveUp) > 0:
			return cli.Failf("worker", "queue drained, but %d worker(s) were given up: %s", len(res.GaveUp), res.GaveUp[0])
		}
		return nil
	case monitor.OutcomeBudget:
		fmt.Fprintln(rt.IO.Out, monitor.MarkerError)
		return cli.Limitf("team budget reached: the workers spent $%.4f of $%.4f", res.CostUSD, r.BudgetUSD)
	default:
		fmt.Fprintln(rt.IO.Out, monitor.MarkerError)
		s := res.Stats
		msg := fmt.Sprintf("every worker ended with work left in the queue: %d pending, %d claimed", s.Pending, s.Claimed)
		if s.Blocked > 0 {
			msg += fmt.Sprintf(" (%d blocked by dependencies that are not done)", s.Blocked)
		}
		return cli.Failf("undrained", "%s", msg)
	}
}

// WatchCmd is the watchdog alone.
type WatchCmd struct {
	Once   bool `help:"Make one pass, and follow through the kills it starts (SIGKILL after --grace, release of tasks), then exit; exit 1 when a stopped worker is still running 30s after the grace."`
	Limits `embed:""`
}

// onceSlack is how long watch --once waits, past the grace period, for
// the workers it stopped to end.
const onceSlack = 30 * time.Second

// Run makes watch passes and prints each action as a JSON line.
func (c *WatchCmd) Run(rt *cli.Runtime, root *CLI) error {
	rt.JSON = true
	w, interval, err := setup(rt, root)
	if err != nil {
		return err
	}
	// A team that does not exist is a mistake (a typo in a crontab), as
	// for status and pg-queue: said at once, not watched, and not created.
	if err := teamExists(rt, w); err != nil {
		return err
	}
	enc := jsonl.NewEncoder(rt.IO.Out)
	var deadline time.Time
	if c.Once {
		// Enough for SIGTERM, the grace period, SIGKILL and the release,
		// with room for a loaded machine: each pass runs pg-queue, and
		// a watch that gives up too early leaves kills in flight. A
		// process SIGKILL cannot end (stuck in the kernel) still ends
		// the watch, with exit 1.
		deadline = time.Now().Add(w.Opts.Grace + onceSlack + 2*interval)
	}
	for {
		res, err := w.Pass(rt.Ctx)
		var ie *monitor.IntervalError
		if errors.As(err, &ie) {
			return cli.Usagef("%v", err)
		}
		if err != nil {
			return err
		}
		for _, ev := range res.Events {
			if err := enc.Encode(ev); err != nil {
				return err
			}
		}
		for _, e := range res.Errors {
			fmt.Fprintf(rt.IO.Err, "pg-monitor: warning: %v\n", e)
		}
		if c.Once && (res.InFlight == 0 || time.Now().After(deadline)) {
			if res.InFlight > 0 {
				return cli.Failf("timeout", "%d worker(s) still running after SIGKILL", res.InFlight)
			}
			return nil
		}
		select {
		case <-rt.Ctx.Done():
			return rt.Ctx.Err()
		case <-time.After(interval):
		}
	}
}

// BeatCmd is a heartbeat for shell workers (Help says what it checks).
type BeatCmd struct {
	Worker   string         `help:"Worker name (the n of worker-<n>.json)." env:"POWERGLIDE_WORKER" placeholder:"N"`
	State    *string        `help:"Worker state to record; a change also counts as progress." placeholder:"S"`
	Task     *string        `help:"Current task id (empty to clear); a change also counts as progress." placeholder:"ID"`
	Step     *int           `help:"Current step; a change also counts as progress." placeholder:"N"`
	CostUSD  *float64       `name:"cost-usd" help:"The worker's spending so far in USD (usage.cost_usd, counted in a team budget)." placeholder:"X"`
	Every    *time.Duration `help:"How often this worker beats (heartbeat_interval_ms): a watcher then refuses a stale limit under twice it." placeholder:"D"`
	Progress bool           `help:"Record progress (progress_at) even without a change."`
	PID      int            `name:"pid" help:"The worker's pid: a live process of this user, > 1, not a login shell (default: the parent of pg-monitor, i.e. the calling script's shell). It is marked as the worker in $POWERGLIDE_HOME/run/workers, which watchers of this data root require before they signal it." placeholder:"PID"`
}

// Run writes the heartbeat.
func (b *BeatCmd) Run(rt *cli.Runtime, root *CLI) error {
	if err := resolveTeam(rt, root); err != nil {
		return err
	}
	if b.Worker == "" {
		b.Worker = rt.IO.Getenv("POWERGLIDE_WORKER")
	}
	if b.Worker == "" {
		return cli.Usagef("missing --worker (or POWERGLIDE_WORKER)")
	}
	if err := teamdir.ValidName("team", root.Team); err != nil {
		return cli.Usagef("%v", err)
	}
	if err := teamdir.ValidName("worker", b.Worker); err != nil {
		return cli.Usagef("%v", err)
	}
	tm, host, err := openTeam(rt, root.Team)
	if err != nil {
		return err
	}
	home, err := rt.Home()
	if err != nil {
		return err
	}
	pid := b.PID
	if pid == 0 {
		pid = os.Getppid()
	}
	_, err = monitor.Beat(rt.Ctx, tm, monitor.BeatOptions{Worker: b.Worker, PID: pid, Home: home, Host: host, State: b.State, Task: b.Task,
		Step: b.Step, CostUSD: b.CostUSD, Every: b.Every, Progress: b.Progress})
	if err != nil {
		if errors.Is(err, monitor.ErrInvalid) {
			return cli.Usagef("%v", err)
		}
		return cli.Failf("beat", "%v", err)
	}
	return nil
}

// StatusCmd lists workers.
type StatusCmd struct {
	JSON   bool   `help:"Print JSON Lines even on a terminal."`
	Jq     string `help:"Apply a jq filter to each record, the workers' and the team budget's (tell them apart by .type; in-process, gojq); each result is printed as a JSON line." placeholder:"EXPR"`
	Raw    bool   `short:"r" help:"With --jq, print string results as plain text, like jq -r."`
	Limits `embed:""`
}

// Run prints one worker_status record per worker, then the team's ledger
// (a team_budget record) when the team has one.
func (s *StatusCmd) Run(rt *cli.Runtime, root *CLI) error {
	w, _, err := setup(rt, root)
	if err != nil {
		return err
	}
	if err := teamExists(rt, w); err != nil {
		return err
	}
	var code *gojq.Code
	if s.Jq != "" {
		q, err := gojq.Parse(s.Jq)
		if err != nil {
			return cli.Usagef("--jq: %v", err)
		}
		if code, err = gojq.Compile(q); err != nil {
			return cli.Usagef("--jq: %v", err)
		}
	}
	sts, errs := w.Statuses(rt.Ctx)
	for _, e := range errs {
		fmt.Fprintf(rt.IO.Err, "pg-monitor: warning: %v\n", e)
	}
	tb, err := teamBudget(rt.Ctx, w.Team, w.Host)
	if err != nil {
		fmt.Fprintf(rt.IO.Err, "pg-monitor: warning: %v\n", err)
	}
	if code == nil && !rt.IO.JSON(s.JSON) {
		return table(rt, sts, tb)
	}
	rt.JSON = true
	enc := jsonl.NewEncoder(rt.IO.Out)
	recs := make([]any, 0, len(sts)+1)
	for _, st := range sts {
		recs = append(recs, st)
	}
	if tb != nil {
		recs = append(recs, tb)
	}
	for _, st := range recs {
		if code == nil {
			if err := enc.Encode(st); err != nil {
				return err
			}
			continue
		}
		v, err := toAny(st)
		if err != nil {
			return err
		}
		iter := code.RunWithContext(rt.Ctx, v)
		for {
			out, ok := iter.Next()
			if !ok {
				break
			}
			if err, ok := out.(error); ok {
				var he *gojq.HaltError
				if errors.As(err, &he) && he.Value() == nil {
					break
				}
				return cli.Failf("jq", "--jq: %v", err)
			}
			if str, ok := out.(string); ok && s.Raw {
				if _, err := fmt.Fprintln(rt.IO.Out, str); err != nil {
					return err
				}
				continue
			}
			if err := enc.Encode(out); err != nil {
				return err
			}
		}
	}
	return nil
}

// teamBudget reads the team's ledger, its dead and expired reservations
// dropped first; nil when the team has none.
func teamBudget(ctx context.Context, t store.Team, host proc.Host) (*protocol.TeamBudget, error) {
	if _, err := ledger.Read(ctx, t); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if _, err := ledger.Expire(ctx, t, host, time.Now()); err != nil {
		return nil, err
	}
	return ledger.Read(ctx, t)
}

func table(rt *cli.Runtime, sts []monitor.Status, tb *protocol.TeamBudget) error {
	tw := tabwriter.NewWriter(rt.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tLIVENESS\tPID\tSTATE\tTASK\tHEARTBEAT\tCOST\tREASON")
	for _, s := range sts {
		cost := s.Usage.CostUSD // every process of the worker: spent plus usage
		if s.Spent != nil {
			cost += s.Spent.CostUSD
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%.1fs ago\t$%.4f\t%s\n", s.Worker, s.Liveness, s.PID, s.State, s.Task, s.HeartbeatAgeS, cost, s.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if tb != nil {
		_, err := fmt.Fprintln(rt.IO.Out, budgetLine(tb))
		return err
	}
	return nil
}

// toAny turns a record into the plain values gojq works on.
func toAny(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(b, &out)
}

// budgetLine is the ledger in one line, for people.
func budgetLine(tb *protocol.TeamBudget) string {
	limit := "no budget"
	if tb.BudgetUSD > 0 {
		limit = fmt.Sprintf("budget $%.4f, $%.4f left", tb.BudgetUSD, max(0, tb.BudgetUSD-tb.SpentUSD-tb.ReservedUSD))
	}
	return fmt.Sprintf("team: $%.4f spent in %d calls, $%.4f reserved by %d in flight; %s", tb.SpentUSD, tb.Calls, tb.ReservedUSD, len(tb.Reservations), limit)
}
