// Package pgqueue is the command line of pg-queue, the team task queue: it
// adds, claims, completes and lists the tasks of a team directory through
// pkg/queue, and follows the team journal.
package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime/debug"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/itchyny/gojq"
	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/dial"
	_ "github.com/powerglide/powerglide/pkg/store/dial/pgdial" // opens PostgreSQL stores itself
	"github.com/powerglide/powerglide/pkg/store/filestore"
	"github.com/powerglide/powerglide/pkg/teamdir"
	"github.com/powerglide/powerglide/pkg/termtext"
)

// Spec describes pg-queue for cli.Main.
func Spec() *cli.Spec {
	return &cli.Spec{
		Name: "pg-queue",
		Description: `The team task queue: tasks with priorities and dependencies, claimed under leases with fencing tokens.
The queue lives in $POWERGLIDE_HOME/teams/<team>/: task-queue.json holds the live tasks as one JSON document (valid at every instant, for jq), events.jsonl gets one line per change (tail -f it, or pg-queue watch), task-archive.jsonl holds finished tasks moved out of the live file, and lock is the flock every change holds. task-queue.idx and task-archive.idx are caches that may be deleted at any time. With --store postgres://... (POWERGLIDE_STORE, config key store) the same queue, journal and commands live in PostgreSQL instead, shared by hosts (docs/store.md, docs/postgres.md).

A claim is a lease with a fencing token: renew, complete, fail and release must present the token, and a stale token (the lease expired and the task went to another worker, or it was released or cancelled) changes nothing and fails with "lease lost" (exit 1). Completing again with the same token is a harmless success. Every claim counts as an attempt: an expired lease makes the task claimable again, and a task that used max_attempts attempts fails with the reason in its error field. A pending task whose depends_on are not all done is blocked; it is stuck when a dependency failed or was cancelled, or it lies on a dependency cycle (add refuses cycles; a file edited by hand may hold one), so a swarm still drains.

Bad input changes nothing and creates nothing: the team directory appears with the first change that succeeds (0700, as the data root and teams/ when missing). A data root, teams/ or team directory that is not yours or root's, or that others may write, or one below a directory others may write that is not sticky like /tmp, is refused with exit 2: another user could swap the team's files (docs/team-dir.md). A task-queue.json edited by hand keeps the fields pg-queue does not know; one of a newer version, or one pg-queue cannot read, is refused with exit 2 (see docs/team-dir.md).

Output is JSON Lines on stdout (list prints a table on a terminal unless --json). Exit codes: 0 ok, 1 failure (unknown task, lease lost), 2 bad input (nothing changed), 3 nothing to claim.

Examples (each command's --help has more):
  $ pg-queue add --team web 'fix the flaky test' --id flaky
  $ task=$(pg-queue claim --team web --worker 3) || exit
  $ pg-queue complete --team web flaky --token "$(jq -r .claim.token <<<"$task")"
  $ pg-queue list --team web`,
		CLI:     &CLI{},
		Schemas: []string{"task", "task-input", "journal-event", "queue-stats", "queue-count", "queue-init", "store-agent-hello", "store-agent-request", "store-agent-response", "error"},
	}
}

// CLI is pg-queue's grammar.
type CLI struct {
	cli.Common `embed:""`

	Team  string `help:"Team whose queue to use: $POWERGLIDE_HOME/teams/<team>/." config:"team" env:"POWERGLIDE_TEAM" placeholder:"NAME"`
	Store string `help:"Where the team's state lives: empty or file: (the team directory under $POWERGLIDE_HOME), file:/path (the one under /path), postgres://... or a libpq keyword string (PostgreSQL, shared by hosts; PG* variables fill what it leaves out)." config:"store" env:"POWERGLIDE_STORE" placeholder:"URL"`
	JSON  bool   `help:"Print JSON Lines even on a terminal."`

	Init     InitCmd     `cmd:"" help:"Prepare the store for the team: create its directory, or apply the PostgreSQL schema's migrations."`
	Add      AddCmd      `cmd:"" help:"Add a task from arguments, or many as JSON Lines on stdin (add -, or add with no title when stdin is not a terminal); all or nothing."`
	Claim    ClaimCmd    `cmd:"" help:"Lease the highest-priority, then oldest, claimable task; exit 3 when there is none."`
	Renew    RenewCmd    `cmd:"" help:"Extend the lease of a claimed task."`
	Complete CompleteCmd `cmd:"" help:"Mark a claimed task done, with an optional JSON result."`
	Fail     FailCmd     `cmd:"" help:"Mark a claimed task failed, or pending again with --retry."`
	Release  ReleaseCmd  `cmd:"" help:"Hand a claimed task back to the queue (the attempt still counts)."`
	Cancel   CancelCmd   `cmd:"" help:"Cancel pending or claimed tasks."`
	List     ListCmd     `cmd:"" help:"List tasks, live and archived (--live: only task-queue.json)."`
	Show     ShowCmd     `cmd:"" help:"Print tasks by id, live or archived."`
	Stats    StatsCmd    `cmd:"" help:"Print counts by status, blocked tasks, the oldest pending age and recent throughput."`
	Watch    WatchCmd    `cmd:"" help:"Follow the team journal, events.jsonl."`
	Archive  ArchiveCmd  `cmd:"" help:"Move finished tasks out of task-queue.json into task-archive.jsonl."`
	Prune    PruneCmd    `cmd:"" help:"Delete finished tasks from task-queue.json and task-archive.jsonl."`
	Agent    AgentCmd    `cmd:"" help:"Serve a PostgreSQL store to this host's commands over a Unix socket (started on first use; see store_agent)."`
}

// teamExists is checked by the commands that only read a team (list,
// stats): a read creates nothing, and an empty answer for a mistyped team
// would look like an idle one, so a missing team is a failure that says
// so (exit 1).
func teamExists(rt *cli.Runtime, t store.Team) error {
	err := t.Exists(rt.Ctx)
	if errors.Is(err, fs.ErrNotExist) {
		return cli.Failf("not_found", "%v", err)
	}
	return err
}

// open resolves the team and opens it in the configured store: on
// PostgreSQL through the host's store agent (agent.go) unless store_agent
// is off.
func (c *CLI) open(rt *cli.Runtime) (store.Team, error) { return c.openVia(rt, true) }

// openVia is open; useAgent false connects to the store directly.
func (c *CLI) openVia(rt *cli.Runtime, useAgent bool) (store.Team, error) {
	// A one-shot command lives a few milliseconds: collecting garbage would
	// cost more than the memory it frees. The limit keeps a huge queue from
	// growing without bound. (watch, which runs for long, turns it back on.)
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(256 << 20)
	cfg, err := rt.Config()
	if err != nil {
		return nil, err
	}
	team := cfg.String("team")
	if team == "" {
		return nil, cli.Usagef("no team: use --team NAME or set POWERGLIDE_TEAM")
	}
	if err := teamdir.ValidName("team", team); err != nil {
		return nil, cli.Usagef("%v", err)
	}
	if n := cfg.Int("queue_keep_finished"); n < 1 {
		return nil, cli.Usagef("queue_keep_finished must be at least 1, got %d", n)
	}
	switch v := cfg.String("store_agent"); v {
	case "auto", "off":
	default:
		return nil, cli.Usagef("store_agent must be auto or off, got %q", v)
	}
	var warned sync.Once
	o := dial.Options{OneShot: true, File: filestore.Options{Crash: crashHook(), OnSettleError: func(err error) {
		warned.Do(func() { fmt.Fprintf(rt.IO.Err, "pg-queue: warning: cannot settle the queue: %v\n", err) })
	}}}
	if useAgent {
		began := time.Now()
		if st, t, ok := agentTeam(rt, cfg, o, team); ok {
			rt.Defer(func() { st.Close() })
			return t, nil
		}
		// The direct connection gets only what is left of the connect
		// timeout: an agent that found the server silent has spent its
		// part of it already.
		o.Began = began
	}
	st, t, err := dial.Team(rt.Ctx, cfg, o, team)
	if err != nil {
		return nil, err
	}
	rt.Defer(func() { st.Close() })
	return t, nil
}

// tasks opens the team's queue.
func (c *CLI) tasks(rt *cli.Runtime) (store.Tasks, error) {
	t, err := c.open(rt)
	if err != nil {
		return nil, err
	}
	return t.Tasks(), nil
}

func lease(rt *cli.Runtime) (time.Duration, error) {
	cfg, err := rt.Config()
	if err != nil {
		return 0, err
	}
	d := cfg.Duration("lease")
	if d <= 0 {
		return 0, cli.Usagef("lease must be positive, got %s", d)
	}
	return d, nil
}

// fail maps queue errors to the exit-code table.
func fail(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, queue.ErrNothing):
		return cli.Nothingf("%v", err)
	case errors.Is(err, queue.ErrLeaseLost):
		return cli.Failf("lease_lost", "%v", err)
	case errors.Is(err, queue.ErrNotFound):
		return cli.Failf("not_found", "%v", err)
	case errors.Is(err, queue.ErrFinished):
		return cli.Failf("finished", "%v", err)
	}
	return err
}

// printer writes records as JSON lines, or what a jq filter makes of them.
type printer struct {
	out io.Writer
	enc interface{ Encode(any) error }
	jq  *gojq.Code
	raw bool
}

func newPrinter(rt *cli.Runtime, expr string, raw bool) (*printer, error) {
	p := &printer{out: rt.IO.Out, enc: jsonl.NewEncoder(rt.IO.Out), raw: raw}
	if expr != "" {
		query, err := gojq.Parse(expr)
		if err != nil {
			return nil, cli.Usagef("--jq: %v", err)
		}
		code, err := gojq.Compile(query, gojq.WithEnvironLoader(func() []string { return rt.IO.Env }))
		if err != nil {
			return nil, cli.Usagef("--jq: %v", err)
		}
		p.jq = code
	}
	return p, nil
}

// print writes one record; it reports how many lines it wrote.
func (p *printer) print(rec any) (int, error) {
	if p.jq == nil {
		if b, ok := rec.([]byte); ok { // one JSON line already
			_, err := p.out.Write(append(b, '\n'))
			return 1, err
		}
		return 1, p.enc.Encode(rec)
	}
	var v any
	switch r := rec.(type) {
	case []byte:
		if err := json.Unmarshal(r, &v); err != nil {
			return 0, err
		}
	default:
		b, err := json.Marshal(rec)
		if err != nil {
			return 0, err
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return 0, err
		}
	}
	return p.run(v)
}

func (p *printer) run(v any) (int, error) {
	n := 0
	iter := p.jq.Run(v)
	for {
		out, ok := iter.Next()
		if !ok {
			return n, nil
		}
		if err, ok := out.(error); ok {
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				return n, nil
			}
			return n, cli.Failf("jq", "--jq: %v", err)
		}
		if s, ok := out.(string); ok && p.raw {
			if _, err := fmt.Fprintln(p.out, s); err != nil {
				return n, err
			}
		} else {
			b, err := gojq.Marshal(out)
			if err != nil {
				return n, cli.Failf("jq", "--jq: %v", err)
			}
			if _, err := p.out.Write(append(b, '\n')); err != nil {
				return n, err
			}
		}
		n++
	}
}

// printTasks prints tasks as JSON lines.
func printTasks(rt *cli.Runtime, ts ...protocol.Task) error {
	for i := range ts {
		// As stored: with the fields this version does not know.
		b, err := queue.EncodeTask(&ts[i])
		if err != nil {
			return err
		}
		if _, err := rt.IO.Out.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// InitCmd prepares the store.
type InitCmd struct{}

// Help details init.
func (c *InitCmd) Help() string {
	return `On files (the default store), creates the team directory $POWERGLIDE_HOME/teams/<team>/ and its logs/ directory; every change creates them too, so init is only needed to have them before the first task.

On PostgreSQL, applies the schema's migrations that the database lacks, under an advisory lock, so several hosts may run it at once; every tool also applies them on first use. It changes no team: the team appears with its first task, worker or budget.

Prints one record: {"type":"init","store":"file"|"postgres","team":...,"dir":... (files),"schema_version":N (PostgreSQL)}.

Examples:
  $ pg-queue init --team T
  $ pg-queue init --store postgres://pg@db/powerglide --team T`
}

// Run prepares the store and prints what it did.
func (c *InitCmd) Run(rt *cli.Runtime, root *CLI) error {
	rt.JSON = true
	cfg, err := rt.Config()
	if err != nil {
		return err
	}
	team := cfg.String("team")
	if err := teamdir.ValidName("team", team); err != nil {
		return cli.Usagef("%v", err)
	}
	rec, err := dial.Init(rt.Ctx, cfg.String("store"), dial.Options{Home: cfg.String("home")}, team)
	if err != nil {
		return err
	}
	return jsonl.NewEncoder(rt.IO.Out).Encode(rec)
}

// AddCmd adds tasks.
type AddCmd struct {
	Title       *string           `arg:"" optional:"" help:"Title of the task, or - to read tasks as JSON Lines on stdin, one task-input record a line (pg-queue schema task-input: a title, the other fields optional). With no title, tasks are read from stdin when it is not a terminal."`
	Prompt      string            `help:"What the worker should do (default: the title)."`
	Priority    int               `help:"Higher runs first." default:"0"`
	DependsOn   []string          `help:"Ids of tasks that must be done first (comma-separated or repeated)." placeholder:"ID"`
	Label       map[string]string `help:"A label, key=value (repeatable)." placeholder:"K=V"`
	Verify      string            `help:"Command that must pass before the task counts as done (pg-loop runs it)." placeholder:"CMD"`
	MaxAttempts *int              `help:"How many claims the task gets before it fails, at least 1 (default 3)." placeholder:"N"`
	ID          string            `name:"id" help:"Id of the task (default t-<ULID>)."`
}

// Run adds the tasks and prints them.
func (c *AddCmd) Run(rt *cli.Runtime, root *CLI) error {
	rt.JSON = true
	var tasks []protocol.Task
	var lines []int
	if c.Title == nil && rt.IO.InTTY {
		return cli.Usagef(`expected "<title>", or tasks as JSON Lines on stdin (pg-queue add - < tasks.jsonl)`)
	}
	if c.Title == nil || *c.Title == "-" {
		if c.Prompt != "" || c.Priority != 0 || len(c.DependsOn) > 0 || len(c.Label) > 0 || c.Verify != "" || c.MaxAttempts != nil || c.ID != "" {
			return cli.Usagef("add: with tasks on stdin the task fields come from there; flags are for a task given by its title")
		}
		dec := jsonl.NewDecoder(rt.IO.In, "stdin").Strict()
		for {
			var in protocol.TaskInput
			err := dec.Decode(&in)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			tasks = append(tasks, in.Task())
			lines = append(lines, dec.Line())
		}
		if len(tasks) == 0 {
			return cli.Usagef("add: no title, and no tasks on stdin")
		}
	} else {
		t := protocol.Task{ID: c.ID, Title: *c.Title, Prompt: c.Prompt, Priority: c.Priority,
			DependsOn: splitIDs(c.DependsOn), Labels: c.Label, Verify: c.Verify}
		if c.MaxAttempts != nil {
			// Given, 0 is a mistake, not "the default".
			if *c.MaxAttempts < 1 {
				return cli.Usagef("--max-attempts must be at least 1, got %d", *c.MaxAttempts)
			}
			t.MaxAttempts = *c.MaxAttempts
		}
		tasks = []protocol.Task{t}
	}
	q, err := root.tasks(rt)
	if err != nil {
		return err
	}
	added, err := q.Add(tasks)
	if err != nil {
		var ie *queue.InputError
		if errors.As(err, &ie) && lines != nil && ie.Index >= 0 && ie.Index < len(lines) {
			return &jsonl.LineError{Name: "stdin", Line: lines[ie.Index], Err: errors.New(ie.Msg + "; nothing was added")}
		}
		if errors.As(err, &ie) {
			return cli.Usagef("%s; nothing was added", ie.Msg)
		}
		return err
	}
	return printTasks(rt, added...)
}

func splitIDs(in []string) []string {
	var out []string
	for _, s := range in {
		for _, id := range strings.Split(s, ",") {
			if id = strings.TrimSpace(id); id != "" {
				out = append(out, id)
			}
		}
	}
	return out
}

// ClaimCmd leases a task.
type ClaimCmd struct {
	Worker string        `help:"Name of the claiming worker." env:"POWERGLIDE_WORKER" required:"" placeholder:"W"`
	Lease  time.Duration `help:"Length of the lease; renew before it ends (default 10m, at most 876000h)." config:"lease" env:"POWERGLIDE_LEASE" placeholder:"D"`
	Wait   time.Duration `help:"Wait up to this long for a claimable task before exiting 3." placeholder:"D"`
}

// Run claims a task and prints it with its claim.
func (c *ClaimCmd) Run(rt *cli.Runtime, root *CLI) error {
	rt.JSON = true
	if err := teamdir.ValidName("worker", c.Worker); err != nil {
		return cli.Usagef("%v", err)
	}
	d, err := lease(rt)
	if err != nil {
		return err
	}
	q, err := root.tasks(rt)
	if err != nil {
		return err
	}
	rt.CatchBrokenPipe() // a reader gone is a lost record too: give the claim back
	t, err := q.WaitClaim(rt.Ctx, c.Worker, d, c.Wait)
	if err != nil {
		return fail(err)
	}
	if err := printTasks(rt, *t); err != nil {
		// No worker will ever see this claim: hand the task back now
		// rather than when the lease runs out.
		if _, rerr := q.Unclaim(t.ID, t.Claim.Token, "the claimed task could not be written: "+err.Error()); rerr != nil {
			return fmt.Errorf("%w; the claim of %s (token %d) could not be released: %v", err, t.ID, t.Claim.Token, rerr)
		}
		return fmt.Errorf("%w; the claim of %s was released", err, t.ID)
	}
	return nil
}

// tokenArgs are the id and fencing token of a claimed task.
type tokenArgs struct {
	ID    string `arg:"" help:"Id of the task."`
	Token int64  `help:"The fencing token of your claim (.claim.token of the claimed task)." required:""`
}

// RenewCmd extends a lease.
type RenewCmd struct {
	tokenArgs
	Lease time.Duration `help:"New length of the lease, from now (default 10m)." config:"lease" env:"POWERGLIDE_LEASE" placeholder:"D"`
}

// Run renews the lease and prints the task.
func (c *RenewCmd) Run(rt *cli.Runtime, root *CLI) error {
	rt.JSON = true
	d, err := lease(rt)
	if err != nil {
		return err
	}
	q, err := root.tasks(rt)
	if err != nil {
		return err
	}
	t, err := q.Renew(c.ID, c.Token, d)
	if err != nil {
		return fail(err)
	}
	return printTasks(rt, *t)
}

// CompleteCmd marks a task done.
type CompleteCmd struct {
	tokenArgs
	Result string `help:"Result as JSON, or - to read it from stdin; nested at most 97 levels deep, so task-queue.json stays readable by jq." placeholder:"JSON"`
}

// Run completes the task and prints it.
func (c *CompleteCmd) Run(rt *cli.Runtime, root *CLI) error {
	rt.JSON = true
	var result json.RawMessage
	if c.Result != "" {
		raw := []byte(c.Result)
		if c.Result == "-" {
			b, err := io.ReadAll(rt.IO.In)
			if err != nil {
				return fmt.Errorf("read result: %w", err)
			}
			raw = b
		}
		if !json.Valid(raw) {
			return cli.Usagef("--result is not valid JSON (quote a string: '\"done\"')")
		}
		result = raw
	}
	q, err := root.tasks(rt)
	if err != nil {
		return err
	}
	t, err := q.Complete(c.ID, c.Token, result)
	if err != nil {
		return fail(err)
	}
	return printTasks(rt, *t)
}

// FailCmd marks a task failed.
type FailCmd struct {
	tokenArgs
	Error string `help:"What went wrong." required:"" placeholder:"MSG"`
	Retry bool   `help:"Put the task back to pending when it has attempts left."`
}

// Run fails the task and prints it.
func (c *FailCmd) Run(rt *cli.Runtime, root *CLI) error {
	rt.JSON = true
	q, err := root.tasks(rt)
	if err != nil {
		return err
	}
	t, err := q.Fail(c.ID, c.Token, c.Error, c.Retry)
	if err != nil {
		return fail(err)
	}
	return printTasks(rt, *t)
}

// ReleaseCmd hands tasks back.
type ReleaseCmd struct {
	ID          string `arg:"" optional:"" help:"Id of the task (with --token)."`
	Token       int64  `help:"The fencing token of your claim."`
	Worker      string `help:"Release the tasks claimed by this worker (for supervisors). Without --before-token, every one: also those of a restarted worker of the same name." placeholder:"W"`
	BeforeToken int64  `name:"before-token" help:"With --worker, only claims whose token is below N: take N from 'pg-queue stats --jq .next_token' when the worker stopped, and the claims of a restarted worker are safe." placeholder:"N"`
	Reason      string `help:"Why, recorded in the journal (with --worker)."`
}

// Run releases and prints the released tasks.
func (c *ReleaseCmd) Run(rt *cli.Runtime, root *CLI) error {
	rt.JSON = true
	switch {
	case c.Worker != "" && c.ID != "":
		return cli.Usagef("give a task id with --token, or --worker, not both")
	case c.Worker == "" && c.ID == "":
		return cli.Usagef("give a task id with --token, or --worker")
	case c.ID != "" && c.Token == 0:
		return cli.Usagef("--token is required with a task id")
	case c.BeforeToken != 0 && c.Worker == "":
		return cli.Usagef("--before-token goes with --worker")
	case c.BeforeToken < 0:
		return cli.Usagef("--before-token must be positive, got %d", c.BeforeToken)
	}
	q, err := root.tasks(rt)
	if err != nil {
		return err
	}
	if c.Worker != "" {
		ts, err := q.ReleaseWorker(c.Worker, c.Reason, c.BeforeToken)
		if err != nil {
			return fail(err)
		}
		return printTasks(rt, ts...)
	}
	t, err := q.Release(c.ID, c.Token)
	if err != nil {
		return fail(err)
	}
	return printTasks(rt, *t)
}

// CancelCmd cancels tasks.
type CancelCmd struct {
	IDs    []string `arg:"" name:"id" help:"Ids of the tasks: all are cancelled, or none when one is unknown or already done or failed."`
	Reason string   `help:"Why, stored in the task's error and the journal."`
}

// Run cancels and prints the tasks.
func (c *CancelCmd) Run(rt *cli.Runtime, root *CLI) error {
	rt.JSON = true
	q, err := root.tasks(rt)
	if err != nil {
		return err
	}
	ts, err := q.CancelAll(c.IDs, c.Reason)
	if err != nil {
		return fail(err)
	}
	return printTasks(rt, ts...)
}

// ListCmd lists tasks: the finished ones of task-archive.jsonl first
// (oldest first), then those of task-queue.json in queue order, so that
// `list --status done` counts every done task, however many were archived.
type ListCmd struct {
	Status   []string `help:"Only these statuses: pending, claimed, done, failed, cancelled, blocked." placeholder:"S"`
	Worker   string   `help:"Only tasks claimed by this worker." placeholder:"W"`
	Live     bool     `help:"Only the live tasks of task-queue.json, not the finished ones archived in task-archive.jsonl."`
	Archived bool     `hidden:"" help:"Include archived tasks (the default now; kept for old scripts)."`
	JQ       string   `name:"jq" help:"jq filter applied to each task (in-process)." placeholder:"EXPR"`
	Raw      bool     `short:"r" help:"With --jq, print strings without quotes."`
}

// Run prints the tasks.
func (c *ListCmd) Run(rt *cli.Runtime, root *CLI) error {
	rt.JSON = c.JQ != "" || rt.IO.JSON(root.JSON)
	if c.Live && c.Archived {
		return cli.Usagef("--live and --archived contradict each other")
	}
	p, err := newPrinter(rt, c.JQ, c.Raw)
	if err != nil {
		return err
	}
	t, err := root.open(rt)
	if err != nil {
		return err
	}
	// Bad input (an unknown status) is reported before a missing team.
	ts, err := t.Tasks().List(queue.ListOptions{Status: splitIDs(c.Status), Worker: c.Worker, Archived: !c.Live})
	if err != nil {
		return fail(err)
	}
	if err := teamExists(rt, t); err != nil {
		return err
	}
	if !rt.JSON {
		return table(rt.IO.Out, ts)
	}
	for i := range ts {
		b, err := queue.EncodeTask(&ts[i])
		if err != nil {
			return err
		}
		if _, err := p.print(b); err != nil {
			return err
		}
	}
	return nil
}

func table(w io.Writer, ts []protocol.Task) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tPRI\tTRIES\tWORKER\tTITLE")
	for _, t := range ts {
		st := t.Status
		if t.Blocked {
			st = "blocked"
		}
		worker := "-"
		if t.Claim != nil && t.Status == protocol.StatusClaimed {
			worker = t.Claim.Worker
		}
		// A title (or a hand-edited id) may carry terminal escapes: shown,
		// not obeyed.
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%s\t%s\n", termtext.Line(t.ID), st, t.Priority, t.Attempts, t.MaxAttempts, termtext.Line(worker), termtext.Line(t.Title))
	}
	return tw.Flush()
}

// ShowCmd prints tasks.
type ShowCmd struct {
	IDs []string `arg:"" name:"id" help:"Ids of the tasks."`
}

// Run prints each task.
func (c *ShowCmd) Run(rt *cli.Runtime, root *CLI) error {
	rt.JSON = true
	q, err := root.tasks(rt)
	if err != nil {
		return err
	}
	for _, id := range c.IDs {
		t, err := q.Show(id)
		if err != nil {
			return fail(err)
		}
		if err := printTasks(rt, *t); err != nil {
			return err
		}
	}
	return nil
}

// StatsCmd prints queue statistics.
type StatsCmd struct {
	JQ  string `name:"jq" help:"jq filter applied to the stats record." placeholder:"EXPR"`
	Raw bool   `short:"r" help:"With --jq, print strings without quotes."`
}

// Run prints one stats record.
func (c *StatsCmd) Run(rt *cli.Runtime, root *CLI) error {
	rt.JSON = true
	p, err := newPrinter(rt, c.JQ, c.Raw)
	if err != nil {
		return err
	}
	t, err := root.open(rt)
	if err != nil {
		return err
	}
	if err := teamExists(rt, t); err != nil {
		return err
	}
	st, err := t.Tasks().Stats()
	if err != nil {
		return err
	}
	_, err = p.print(st)
	return err
}

// WatchCmd follows the journal.
type WatchCmd struct {
	FromStart bool          `help:"Print the journal from its start, not only new lines."`
	JQ        string        `name:"jq" help:"jq filter applied to each journal record." placeholder:"EXPR"`
	Raw       bool          `short:"r" help:"With --jq, print strings without quotes."`
	Count     int           `help:"Exit after printing this many lines (0: follow until interrupted)." placeholder:"N"`
	For       time.Duration `help:"Stop following after this long (exit 0)." placeholder:"D"`
}

// Help details watch.
func (c *WatchCmd) Help() string {
	return `Prints each line appended to events.jsonl, as tail -f would, and copes with a journal that appears late, is truncated or is replaced. With --jq, each record goes through the filter instead. Ctrl-C (or SIGTERM) ends it quietly, with exit 130 (143): no error line, no error record among the data.

A pg-queue killed after committing a change but before journaling it leaves its events for the next change to append. watch appends them itself, under the team lock, when it starts and whenever task-queue.json has changed and then been quiet for a second, so a quiet team's journal is never left short. It never waits for the lock: while another process holds it, watch tries again a second later.

Examples:
  $ pg-queue watch --jq 'select(.op == "complete") | .task' -r
  $ pg-queue watch --from-start --count 1 --jq 'select(.op == "claim")'`
}

// Run follows events.jsonl until interrupted (or --count lines).
func (c *WatchCmd) Run(rt *cli.Runtime, root *CLI) error {
	rt.JSON = true
	// A follower lives long: it connects itself rather than hold an
	// agent's connection.
	t, err := root.openVia(rt, false)
	if err != nil {
		return err
	}
	p, err := newPrinter(rt, c.JQ, c.Raw)
	if err != nil {
		return err
	}
	debug.SetGCPercent(100)
	ctx := rt.Ctx
	if c.For > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.For)
		defer cancel()
	}
	// On files, the follower also settles a quiet queue, so the events
	// of a writer killed before journaling them show now.
	fl, err := t.Journal().Follow(ctx, c.FromStart)
	if err != nil {
		return err
	}
	defer fl.Close()
	printed := 0
	for c.Count <= 0 || printed < c.Count {
		line, err := fl.Next(ctx)
		if err != nil {
			if c.For > 0 && errors.Is(err, context.DeadlineExceeded) && rt.Ctx.Err() == nil {
				return nil
			}
			// A follower the user stops (Ctrl-C, SIGTERM) ends quietly,
			// with 128+n: no error line, no error record among the data.
			var sig *cli.SignalError
			if errors.As(context.Cause(rt.Ctx), &sig) {
				return &cli.Error{Code: sig.ExitCode()}
			}
			return err
		}
		if p.jq == nil {
			if _, err := rt.IO.Out.Write(append(line, '\n')); err != nil {
				return err
			}
			printed++
			continue
		}
		n, err := p.print(line)
		if err != nil {
			var ce *cli.Error
			if errors.As(err, &ce) {
				return err
			}
			fmt.Fprintf(rt.IO.Err, "pg-queue: warning: events.jsonl: skipping a line that is not JSON: %v\n", err)
			continue
		}
		printed += n
	}
	return nil
}

// ArchiveCmd moves finished tasks to the archive.
type ArchiveCmd struct {
	OlderThan time.Duration `help:"Only tasks finished at least this long ago." default:"0s" placeholder:"D"`
}

// Run archives and prints {"type":"archive","count":N}.
func (c *ArchiveCmd) Run(rt *cli.Runtime, root *CLI) error {
	return removeFinished(rt, root, "archive", c.OlderThan, store.Tasks.Archive)
}

// PruneCmd deletes finished tasks.
type PruneCmd struct {
	OlderThan time.Duration `help:"Only tasks finished at least this long ago." default:"0s" placeholder:"D"`
}

// Run prunes and prints {"type":"prune","count":N}.
func (c *PruneCmd) Run(rt *cli.Runtime, root *CLI) error {
	return removeFinished(rt, root, "prune", c.OlderThan, store.Tasks.Prune)
}

// removeFinished is the body archive and prune share: take the tasks
// finished at least olderThan ago out of the live queue with remove, and
// print how many as a {"type":kind,"count":N} record.
func removeFinished(rt *cli.Runtime, root *CLI, kind string, olderThan time.Duration, remove func(store.Tasks, time.Duration) (int, error)) error {
	rt.JSON = true
	q, err := root.tasks(rt)
	if err != nil {
		return err
	}
	n, err := remove(q, olderThan)
	if err != nil {
		return err
	}
	return jsonl.NewEncoder(rt.IO.Out).Encode(protocol.QueueCount{Type: kind, Count: n})
}
