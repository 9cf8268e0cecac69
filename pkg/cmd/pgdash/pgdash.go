// Package pgdash is the command line of pg-dash, the live dashboard of a
// powerglide team.
package pgdash

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/config"
	"github.com/powerglide/powerglide/pkg/dash"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/dial"
	_ "github.com/powerglide/powerglide/pkg/store/dial/pgdial" // opens PostgreSQL stores itself
	"github.com/powerglide/powerglide/pkg/teamdir"
)

const description = `Show a powerglide team live in the terminal: queue progress, workers, their logs.
pg-dash watches $POWERGLIDE_HOME/teams/<team>/ (task-queue.json, events.jsonl, worker-<n>.json, worker-<n>.velocity and logs/worker-<n>.jsonl) with file notifications, polling every --refresh where those are not available, and redraws as the files change. Files that are missing, rotated, truncated or hold invalid lines are reported on a warning line; the view keeps going. A team directory that another user could change (the data root, teams/ or the team's directory not yours or root's, or writable by others) is refused with exit 2 (docs/team-dir.md). With --store postgres://... the team is read from PostgreSQL (every host's workers; the logs are this host's), polled every --refresh, its journal followed through the database.

Views (Tab cycles): the team overview (counts, progress, tokens, cost, elapsed time, ETA and the workers table, with a HOST column when the workers run on more than one host), the selected worker's live log (thinking, tool calls with their arguments, truncated results, verify outcomes, state changes), and the tasks (filter by status or text with /, Enter for a task's detail and result).

Keys: arrows or j/k move or scroll (the mouse wheel too), Enter opens, Esc goes back, p pauses or resumes the selected worker (writes 0 or its last velocity to worker-<n>.velocity), + and - change its velocity, x stops it after confirmation (SIGTERM to its process group, only while its recorded pid still has the recorded start time and carries that worker's mark in this data root, $POWERGLIDE_HOME/run/workers, made by pg-loop, pg-monitor run or beat: a record alone never gets a process signalled; journaled in events.jsonl; a worker that ignores SIGTERM is left to pg-monitor, which SIGKILLs it once its heartbeat is stale), y and n approve or deny the tool call a worker waits on (pg-loop --ask: its state reads approval? and the bottom line shows the call; the answer goes to worker-<n>.approval, as pg-loop approve writes it), ? shows every key, q or Ctrl-C quits. Warnings about invalid lines are shown for a minute after the last one.

The dashboard draws on the terminal (stdout, or stderr when stdout is redirected). --once prints a plain-text snapshot to stdout instead, for scripts and non-terminals; --once --json prints it as one JSON record. The flags are those of the show command: pg-dash show --help.

Examples (shell-llm.sh, a model in sh and jq, is in the repository: scripts/swap/):
  $ pg-dash --team web
  $ pg-dash --team web --once --json | jq .counts
  $ pg-loop --llm scripts/swap/shell-llm.sh --task 'echo hi' | pg-dash - --once`

// CLI is pg-dash's grammar.
type CLI struct {
	cli.Common `embed:""`
	Show       ShowCmd `cmd:"" default:"withargs" help:"Show the team (the default command)."`
}

// ShowCmd shows a team, or one loop's event stream.
type ShowCmd struct {
	Source  string        `arg:"" optional:"" help:"'-' reads one loop's event stream (pg-loop's stdout) from stdin and shows that single worker."`
	Team    string        `short:"t" env:"POWERGLIDE_TEAM" config:"team" help:"Team to show: $POWERGLIDE_HOME/teams/<team>/."`
	Store   string        `env:"POWERGLIDE_STORE" config:"store" help:"Where the team's state lives: empty or file: (the team directory), file:/path (the one under /path), postgres://... (PostgreSQL: the whole team, from every host; the worker logs shown are this host's, and the view is polled every --refresh)." placeholder:"URL"`
	Once    bool          `help:"Print a plain-text snapshot to stdout and exit, instead of the live view."`
	JSON    bool          `name:"json" help:"With --once, print the snapshot as one JSON record."`
	Stale   time.Duration `env:"POWERGLIDE_DASH_STALE" config:"dash_stale" help:"Heartbeat age at which a worker is shown as stale, in red (default: pg-monitor's --stale, config monitor_heartbeat, 30s unless set)."`
	Refresh time.Duration `env:"POWERGLIDE_DASH_REFRESH" config:"dash_refresh" help:"Polling interval when file notifications are unavailable or --poll is given (default 1s)."`
	Poll    bool          `help:"Poll the team files every --refresh instead of using file notifications (e.g. on network filesystems)."`
	Worker  string        `short:"w" help:"Worker to select first."`
	View    string        `enum:"overview,worker,tasks" default:"overview" help:"View to start in: overview, worker or tasks."`
	Now     string        `hidden:"" help:"Pretend the time is this RFC 3339 instant (reproducible snapshots in tests)."`
}

// Spec describes pg-dash.
func Spec() *cli.Spec {
	return &cli.Spec{Name: "pg-dash", Description: description, CLI: &CLI{}, Schemas: []string{"task", "worker", "loop-event", "journal-event"}}
}

// Run shows the team or the stream.
func (c *ShowCmd) Run(rt *cli.Runtime) error {
	cfg, err := rt.Config()
	if err != nil {
		return err
	}
	if c.Source != "" && c.Source != "-" {
		return cli.Usagef("unexpected argument %q: the only argument is '-' (read a loop's events from stdin)", c.Source)
	}
	if c.JSON && !c.Once {
		return cli.Usagef("--json needs --once: the live view is for terminals")
	}
	if c.JSON {
		rt.JSON = true
	}
	stale := cfg.Duration("dash_stale")
	if cfg.Get("dash_stale").Source == config.SourceDefault {
		// Red where pg-monitor would act: its heartbeat limit.
		stale = cfg.Duration("monitor_heartbeat")
	}
	opt := dash.Options{
		Stale:   stale,
		Refresh: cfg.Duration("dash_refresh"),
		Poll:    c.Poll,
		View:    c.View,
		Worker:  c.Worker,
	}
	if opt.Stale <= 0 {
		return cli.Usagef("--stale must be positive")
	}
	if opt.Refresh <= 0 {
		return cli.Usagef("--refresh must be positive")
	}
	now := time.Now
	if c.Now != "" {
		t, err := time.Parse(time.RFC3339, c.Now)
		if err != nil {
			return cli.Usagef("--now: %v", err)
		}
		now = func() time.Time { return t }
	}
	opt.Now = now
	opt.Host = proc.ThisHost()

	stream := c.Source == "-"
	if !stream {
		team := cfg.String("team")
		if team == "" {
			return cli.Usagef("no team: give --team T (or set POWERGLIDE_TEAM), or '-' to read a loop's stream from stdin")
		}
		home, err := rt.Home()
		if err != nil {
			return err
		}
		opt.Dir, err = teamdir.New(home, team)
		if err != nil {
			return cli.Usagef("%v", err)
		}
		st, tm, err := dial.Team(rt.Ctx, cfg, dial.Options{}, team)
		if err != nil {
			return err
		}
		defer st.Close()
		opt.Team = tm
		opt.Host.Shared = store.Shared(st)
	} else {
		if rt.IO.InTTY && !c.Once {
			return cli.Usagef("stdin is a terminal: pipe a loop's events into pg-dash - (pg-loop ... | pg-dash -)")
		}
		opt.Stream = rt.IO.In
	}

	if c.Once {
		return c.once(rt, opt)
	}
	return c.live(rt, opt)
}

func (c *ShowCmd) once(rt *cli.Runtime, opt dash.Options) error {
	now := opt.Now()
	if opt.Stream != nil {
		snap, es, info, err := dash.ReadStream(opt.Stream)
		if err != nil {
			return cli.Failf("read", "read stdin: %v", err)
		}
		rec := dash.Record(&snap, now, opt.Stale, info.Warnings)
		rec.Stream = &info.Record
		if c.JSON {
			return dash.WriteJSON(rt.IO.Out, rec)
		}
		if err := dash.WriteText(rt.IO.Out, rec); err != nil {
			return err
		}
		if len(es) > 0 {
			fmt.Fprintln(rt.IO.Out)
			if len(es) > 30 {
				fmt.Fprintf(rt.IO.Out, "last 30 of %d events:\n", len(es))
				es = es[len(es)-30:]
			}
			return dash.WriteEntries(rt.IO.Out, es)
		}
		return nil
	}
	if err := opt.Team.Exists(rt.Ctx); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return cli.Failf("not_found", "%v", err)
		}
		return err
	}
	l := dash.Loader{Dir: opt.Dir, Team: opt.Team, Host: opt.Host}
	r := l.Load(jsonl.Pos{}, now)
	if !l.Files() {
		r.First = dash.FirstJournalTS(rt.Ctx, opt.Team, 5*time.Second)
	}
	r.Snap.Started = dash.StartOf(r.First, &r.Snap)
	rec := dash.Record(&r.Snap, now, opt.Stale, r.Warnings())
	if c.JSON {
		return dash.WriteJSON(rt.IO.Out, rec)
	}
	return dash.WriteText(rt.IO.Out, rec)
}

func (c *ShowCmd) live(rt *cli.Runtime, opt dash.Options) error {
	var out io.Writer
	switch {
	case rt.IO.OutTTY:
		out = cli.Terminal(rt.IO.Out)
	case rt.IO.ErrTTY:
		out = rt.IO.Err
	default:
		return cli.Usagef("no terminal to draw on: use --once for a snapshot (--once --json for JSON)")
	}
	in := rt.IO.In
	if !rt.IO.InTTY || opt.Stream != nil {
		// Keys come from the terminal, also when stdin carries the stream.
		tty, err := os.Open("/dev/tty")
		if err != nil {
			return cli.Usagef("no terminal for keyboard input: %v", err)
		}
		defer tty.Close()
		in = tty
	}
	m := dash.New(opt)
	err := dash.RunTUI(rt.Ctx, m, in, out, rt.IO.Env)
	if err != nil && !errors.Is(err, rt.Ctx.Err()) {
		return cli.Failf("tui", "%v", err)
	}
	return err
}
