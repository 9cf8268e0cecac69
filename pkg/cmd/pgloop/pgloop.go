// Package pgloop is pg-loop's command line: the Ralph loop of one worker.
package pgloop

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/config"
	"github.com/powerglide/powerglide/pkg/guard"
	"github.com/powerglide/powerglide/pkg/ledger"
	"github.com/powerglide/powerglide/pkg/loop"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/secrets"
	"github.com/powerglide/powerglide/pkg/shell"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/dial"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

const description = `The Ralph loop: one worker taking tasks and working them with a model and tools until they pass their checks.
pg-loop runs a state machine (idle → load_tasks → pick_task → thinking → tool_call → executing → observing → … → verify → commit → pick_task … → done | failed) and writes one JSON event per line on stdout: every state transition, the model's answers, tool calls and results, verify runs, commits, limits and tasks. On a terminal the events are shown readably; --json forces JSON Lines. The last stdout line is <POWERGLIDE_DONE> when every task has ended, or <POWERGLIDE_ERROR> when the run could not go on (a provider auth error included, and a model the provider does not have: HTTP 404). In team mode every task means the queue's: a worker that finds nothing claimable while tasks are still blocked or claimed by other workers waits for one (pg-queue stats says when the queue is drained), so pg-monitor never retires a worker that work may still come to; --idle-wait bounds that wait (then exit 3, no marker).

Tasks come from --task TEXT, --tasks FILE|- (JSON Lines of task records), a team queue (--team T --worker N, through pg-queue) or a stage pipeline (--pipeline FILE). The model and the tools are coprocesses (pg-llm serve and pg-tool serve, the binaries next to pg-loop or on PATH) or one-shot commands (--llm CMD, --tools CMD), so any component can be a script of your own.

<POWERGLIDE_DONE> means the queue is drained: every task the run had ended, not that each one succeeded (a task that failed its check or hit a limit still ends). A script tells success from failure by the exit code (0: every task done; 1: a task or the run failed; 3: nothing claimable within --idle-wait; 4: a limit stopped a task or the run; 130/143: a signal) or by the summary record that precedes the marker: {"type":"summary", "ok":…, "outcome":"done|failed|limit|idle|interrupted", "tasks":{"done","failed","cancelled","released"}, "steps", "usage" (tokens in, out, cache, cost), "wall_ms", "model_ms", "tools_ms", "verify_ms", "wait_ms", "harness_ms", "resources" (CPU time and peak memory of pg-loop and of each coprocess, ended before the summary: [{"component":"loop|model|tools", "processes", "user_ms", "sys_ms", "max_rss_kb"}])}.

Every safety limit works on its own: --max-steps per task, the circuit breaker (the same call repeated, one tool failing repeatedly, the same output whatever the inputs, a cycle of 2 to 4 calls repeated; each a config key, the limit event naming the pattern), --budget-tokens/--budget-usd (checked before each call, counting its max_tokens), verify and iteration caps. A limit fails the task with a limit event; the run then exits 4. A call whose provider reports no usage (many OpenAI-compatible and local servers send none in a stream) counts against the budgets and the team ledger at the loop's estimate of its request and answer: a warn log says so once, and its usage is marked "estimated":true. SIGINT and SIGTERM release the claimed task, save the session and exit 130 or 143.

The context window: no request is sent that the loop's estimate puts over the model's window less max_tokens and the reserve. Past --context-soft old tool outputs are pruned, past --context-hard older turns are summarized, and a tool output longer than --tool-output-max keeps its head and tail, the whole text saved in outputs/ of the session, a file the model is told about. A provider's context_overflow compacts harder and retries once; a conversation that cannot fit fails its task, saying so. The model is told its velocity file (--velocity-file; by default worker-<n>.velocity in team mode, else velocity in the session), whose path its tools find in $POWERGLIDE_VELOCITY_FILE, and may write it to slow itself down (the default pg-tool gets --pass-env and --allow-write for it).

Agent Skills (SKILL.md folders in .powerglide/skills and .claude/skills from the workdir up to the repository root, $XDG_CONFIG_HOME/powerglide/skills and ~/.claude/skills) are named with their descriptions in the system prompt when the tools offer the skill tool (the default pg-tool does); the model loads one with the skill tool and reads its files with read. A malformed SKILL.md is a warning log event naming its file and line, and is skipped. --no-skills leaves them out. AGENTS.md, CLAUDE.md and SKILL.md are read only as regular files (no symbolic link, no named pipe) of yours or root's that no other user may write, and the walk up stops below a parent (or its .git) that another user owns or may write, or that is a link: each file left out is a warning log event naming it.

pg-loop serve runs one session as a coprocess for editors and scripts: JSON Lines commands on stdin (prompt, follow_up, steer, abort, approve, deny, state, shutdown), each answered by a reply record with its id, and the same events on stdout (pg-loop serve --help). --ask PATTERN (a tool-name glob, optionally ':' and a wildcard over the call's string arguments, e.g. 'bash:git push*') makes matching tool calls wait for approval: serve emits an approval event and waits for approve or deny; a team worker shows the call in its worker record, where pg-dash (y, n) or pg-loop approve --team T WORKER CALL answers it; any other run denies it with a tool result the model reads.

Keys stay with the model: the tools component (and the verify commands, which run in its sandbox through pg-tool exec) runs without the variables named like secrets (*KEY*, *TOKEN*, *SECRET*, *PASSWORD*, provider variables; POWERGLIDE_PASS_ENV=NAME,... keeps some), and every secret value of the environment or the config, and every string shaped like a well-known key, is replaced by [redacted:NAME] in tool results, events, sessions and every file under $POWERGLIDE_HOME. Output of MCP tools, external tools and network commands reaches the model marked <untrusted>; --guard (warn by default, strict, off) reports, or refuses, calls that carry its URLs or keys onward.

Sessions live in $POWERGLIDE_HOME/sessions/<id>/ (session.json and the append-only memory.jsonl); --resume ID or --continue picks a run up where it stopped, even after kill -9, in the session's workdir wherever pg-loop is started, with the options it was started with (one process drives a session at a time: a session another pg-loop still runs is refused, exit 3, naming its pid; memory.jsonl holds whole records only: a write that fails, on a full disk say, is cut back off and stops the run, exit 1, before it does work the session could not remember) (flags given again win: -C moves the session to another directory, which session.json then names). Its unfinished tasks run first, the one in progress from where it stopped (a tool call the stop cut short is answered as interrupted, its effects unknown, so the model checks the state rather than trust or repeat it; a run stopped while checking the final answer checks it again, with no new model call); tasks given with --task or --tasks are added after them, with ids of their own (task-N numbering goes on; a --tasks id already in the session is refused). A task added with --task to a session that goes on is a follow-up: it starts from the conversation of the session's task that ended last, up to that task's final answer, so it can build on it ("now add tests for it"); in --tasks, the label "follow_up": "true" does the same, and --fresh turns it off. --session-id ID names a new session; --fork ID starts a new session from a copy of ID's history, in ID's workdir or in -C (a second git worktree, say), which then goes its own way; --no-session keeps none. pg-loop sessions lists the sessions, pg-loop sessions show ID prints one with its transcript.

All the flags: pg-loop run --help.

Examples:
  $ pg-loop --task 'make the tests pass' --verify 'go test ./...' --commit
  $ pg-loop --tasks tasks.jsonl --llm ./my-model.sh --tools 'pg-tool'
  $ pg-loop --team web --worker 3 --verify 'make test' --commit
  $ pg-loop --fresh --promise DONE --task 'port the parser' --verify 'make test' --max-iterations 20
  $ pg-loop --pipeline feature.json --var feature='rate limiting' --var test_cmd='go test ./...'
  $ pg-loop --guard strict --task 'summarise the issues' --tools-serve "pg-tool serve --mcp 'gh=github-mcp-server stdio'"
  $ pg-loop --continue
  $ pg-loop --continue --task 'now add tests for it'
  $ pg-loop --fork s-20261125T101500-3f2a9c1d --task 'try it with a map instead'
  $ pg-loop --fork s-20261125T101500-3f2a9c1d -C ../parser-map --session-id parser-map --task 'try it in a second worktree'
  $ pg-loop sessions`

// CLI is pg-loop's grammar.
type CLI struct {
	RunCLI   `embed:""`
	Serve    ServeCmd    `cmd:"" help:"Run one session as a coprocess: JSON Lines commands on stdin (prompt, follow_up, steer, abort, approve, deny, state, shutdown), events on stdout."`
	Approve  ApproveCmd  `cmd:"" help:"Answer a team worker's pending approval (pg-loop --ask): approve the call, or --deny it."`
	Sessions SessionsCmd `cmd:"" help:"List the sessions (JSON Lines: id, parent, status, created, updated, tasks by status, tokens, cost, cwd), or show one with its transcript."`
}

// RunCLI is the grammar of a run: a start that names no other command
// parses with it alone (cli.Spec.Default), not with serve's copy of run's
// flags and the rest.
type RunCLI struct {
	cli.Common `embed:""`
	Run        RunCmd `cmd:"" default:"withargs" help:"Run the loop (the default command: 'pg-loop --task ...' is 'pg-loop run --task ...')."`
}

// Spec describes pg-loop.
func Spec() *cli.Spec {
	return &cli.Spec{
		Name:        "pg-loop",
		Description: description,
		CLI:         &CLI{},
		Default:     func() any { return &RunCLI{} },
		Schemas:     []string{"loop-event", "serve-command", "approval-answer", "task", "request", "model-event", "tool-call", "tool-output", "worker", "session", "session-entry"},
		Waits:       true,
	}
}

// RunCmd runs the loop.
type RunCmd struct {
	Task          []string          `help:"A task prompt (repeatable: one task each). With --resume, --continue or --fork it is added after the session's unfinished tasks, as a follow-up: it starts from the conversation of the session's task that ended last." placeholder:"TEXT" sep:"none" group:"Tasks"`
	Tasks         string            `help:"JSON Lines of tasks ({\"id\",\"title\",\"prompt\",\"verify\",\"labels\"}), a file or - for stdin." placeholder:"FILE" group:"Tasks"`
	Team          string            `help:"Team mode: claim tasks from this team's queue (env POWERGLIDE_TEAM). A worker started by pg-monitor run must name the monitor's team, or none. A team directory that another user could change (not yours or root's, or writable by others) is refused with exit 2 (docs/team-dir.md)." group:"Tasks"`
	Worker        string            `help:"Team mode: this worker's name (env POWERGLIDE_WORKER)." group:"Tasks"`
	Store         string            `help:"Team mode: where the team's state lives: empty or file: (the team directory), file:/path (the one under /path), postgres://... (PostgreSQL, shared by hosts; reached through the host's store agent, pg-queue agent, see store_agent). The pg-queue it runs inherits it; the tools component never sees it." config:"store" env:"POWERGLIDE_STORE" placeholder:"URL" group:"Tasks"`
	Queue         string            `help:"The queue command of team mode (default: pg-queue next to pg-loop, else on PATH)." placeholder:"CMD" group:"Tasks"`
	Lease         string            `help:"Lease asked for a claimed task; renewed as the heartbeat." config:"lease" env:"POWERGLIDE_LEASE" placeholder:"DURATION" group:"Tasks"`
	IdleWait      time.Duration     `help:"Team mode: when nothing is claimable but the queue is not drained (tasks blocked by dependencies or claimed by other workers), wait this long for a claimable task, then exit 3 without <POWERGLIDE_DONE> (0: wait until the queue drains, right under pg-monitor)." default:"0" placeholder:"DURATION" group:"Tasks"`
	Pipeline      string            `help:"Run a stage pipeline (JSON): stages with prompts, exit conditions and iteration caps." placeholder:"FILE" group:"Tasks"`
	PipelineState string            `help:"Where the pipeline's progress is kept (default under $POWERGLIDE_HOME/pipelines/); a killed pipeline resumes at its stage." placeholder:"FILE" group:"Tasks"`
	PipelineReset bool              `help:"Start the pipeline over instead of resuming it." group:"Tasks"`
	Var           map[string]string `help:"Set a pipeline variable, {{KEY}} in prompts and exit conditions (repeatable)." placeholder:"KEY=VALUE" group:"Tasks"`

	LLMServe       string `name:"llm-serve" help:"Model coprocess command line (default: 'pg-llm serve', which pg-loop also asks for the model's context window and prices; with a command of your own, 'pg-llm models --json' runs beside it for them)." placeholder:"CMD" group:"Components"`
	ToolsServe     string `help:"Tools coprocess command line (default: 'pg-tool serve --parallel N', N from --tool-parallel)." placeholder:"CMD" group:"Components"`
	ToolParallel   int    `help:"Tool calls of one turn the default tools coprocess runs at once (pg-tool serve --parallel)." env:"POWERGLIDE_TOOL_PARALLEL" default:"4" placeholder:"N" group:"Components"`
	ToolsList      string `help:"Command printing the tool definitions for the coprocess (default: the default pg-tool serve is asked itself, with no process started; for --tools-serve, its command line with 'list' for a final 'serve')." placeholder:"CMD" group:"Components"`
	LLM            string `name:"llm" help:"One-shot model command: run per turn in -C, the request on stdin, model events on stdout. A relative path to its program is read from the current directory, as with --tools." placeholder:"CMD" group:"Components"`
	Tools          string `help:"One-shot tools command: 'CMD list' and 'CMD call NAME INPUT' per call." placeholder:"CMD" group:"Components"`
	Model          string `help:"Model id or fallback chain passed in each request (default: pg-llm's configured model)." group:"Components"`
	MaxTokens      int    `help:"max_tokens of each request (at least 1); budgets and the context window count it." config:"max_tokens" env:"POWERGLIDE_MAX_TOKENS" default:"8192" group:"Components"`
	System         string `help:"The system prompt, or @FILE to read it (default: a short coding-agent prompt). AGENTS.md and CLAUDE.md from the workdir up to the repository root are added." group:"Components"`
	NoContextFiles bool   `help:"Do not add AGENTS.md and CLAUDE.md (from the workdir up to the repository root) to the system prompt." group:"Components"`
	NoSkills       bool   `name:"no-skills" help:"Offer no Agent Skills: their names and descriptions stay out of the system prompt, and the tools component gets POWERGLIDE_NO_SKILLS=1 (pg-tool then offers no skill tool)." env:"POWERGLIDE_NO_SKILLS" group:"Components"`
	Veto           string `help:"Edit veto for the run: pg-tool runs CMD before and after every edit or write, and a change that makes CMD newly fail is rolled back and the call fails with CMD's output (pg-tool --verify). Needs the default tools component." placeholder:"CMD" group:"Components"`
	Workdir        string `short:"C" help:"Work in this directory (default: the current one; with --resume or --fork, the session's)." default:"." type:"existingdir" group:"Components"`

	Verify        string        `help:"Check run after the model's answer (a task's own verify wins); its failure goes back to the model. It runs in the tools' sandbox (pg-tool exec) with the tools' environment; with another tools component, unconfined (without secrets), and pg-loop warns." placeholder:"CMD" group:"Verify"`
	VerifyTimeout time.Duration `help:"Timeout of one verify run." default:"10m" group:"Verify"`
	MaxVerify     int           `help:"Failed verify runs before the task fails (0: no cap). A task with an iteration cap (--max-iterations, a pipeline stage's max_iterations) runs its iterations: there this cap applies only when given." default:"3" group:"Verify"`
	Commit        bool          `help:"Commit the work with git after a passing verify, the message taken from the model's summary; no commit when nothing changed. In team mode only while the task's lease is still held (renewed with its fencing token just before): a worker that lost it commits nothing. The repository is found at the start; git then runs with no hooks and no fsmonitor, and not at all once the repository's config, config.worktree, info/attributes or commondir changed during the run (the task fails naming the file), nor while the repository's own config names a program git runs (a filter's clean/smudge/process, gpg.program: refused, exit 2; keep trusted ones in your global config)." group:"Verify"`

	Fresh         bool   `help:"Ralph mode: every iteration starts a fresh conversation with the same prompt; the state lives in files and git." group:"Ralph"`
	Promise       string `help:"Completion needs <promise>WORD</promise> in the final answer and a passing verify." placeholder:"WORD" group:"Ralph"`
	MaxIterations int    `help:"Iterations (answers checked) per task before it fails (0: no cap)." default:"0" group:"Ralph"`

	MaxSteps        int           `help:"Model turns per task before the step limit fails it." config:"loop_max_steps" env:"POWERGLIDE_MAX_STEPS" default:"200" group:"Safety"`
	BreakerRepeat   int           `help:"Circuit breaker: the same tool with the same input this many times in a row (0: off)." config:"loop_breaker_repeat" env:"POWERGLIDE_BREAKER_REPEAT" default:"3" group:"Safety"`
	BreakerFailures int           `help:"Circuit breaker: the same tool failing this many times in a row, whatever its input (0: off)." config:"loop_breaker_failures" env:"POWERGLIDE_BREAKER_FAILURES" default:"5" group:"Safety"`
	BreakerOutput   int           `help:"Circuit breaker: the same tool returning the same output this many times in a row, whatever its inputs (0: off). New outputs never trip it." config:"loop_breaker_output" env:"POWERGLIDE_BREAKER_OUTPUT" default:"5" group:"Safety"`
	BreakerCycle    int           `help:"Circuit breaker: a cycle of 2 to 4 calls (A B A B ..., A B C A B C ...) with the same inputs and the same outputs repeated this many times (0: off)." config:"loop_breaker_cycle" env:"POWERGLIDE_BREAKER_CYCLE" default:"3" group:"Safety"`
	BudgetTokens    int           `help:"Token budget of the run: halt before a call that could pass it (0: none). A run is this process and the session it works in (--continue and --resume carry the session's usage); a team worker restarted in a new process (pg-monitor's restarts) starts from 0: for a cap across restarts and workers use --team-budget-usd or pg-monitor run --budget-usd." config:"loop_budget_tokens" env:"POWERGLIDE_BUDGET_TOKENS" default:"0" group:"Safety"`
	BudgetUSD       float64       `name:"budget-usd" help:"Dollar budget of the run, as --budget-tokens counts it (this process and its session, not a team worker's earlier processes): halt before a call that could pass it (0: none). Each call, the first included, is priced at the model's prices from 'pg-llm models' (its estimated input and its max_tokens of output). A model without prices there (a custom or local model) is refused as the run starts, exit 2: give its prices in the config key models (input_per_mtok, output_per_mtok) or use --budget-tokens. With a component of your own and no --model the price per token it reports is used, so the first call runs unpriced, and a call that reports no cost stops the run (limit)." config:"loop_budget_usd" env:"POWERGLIDE_BUDGET_USD" default:"0" group:"Safety"`
	TeamBudgetUSD   *float64      `name:"team-budget-usd" help:"Team mode: set the team's dollar budget in its ledger (budget.json in the team directory; 0 removes the budget), as pg-monitor run --budget-usd does. Whatever sets it, every worker of the team reserves each call's estimated cost in the ledger before the call and settles the real cost after; a call that could take the team past its budget is not made: the task is released and the run exits 4. A worker whose model has no prices in 'pg-llm models' is refused as it starts (exit 2) when the team has a budget, as with --budget-usd. For cron workers started without pg-monitor." env:"POWERGLIDE_TEAM_BUDGET_USD" placeholder:"X" group:"Safety"`
	Velocity        string        `help:"Steps per second: a delay of 1000/velocity ms before each step; 0 pauses (default: full speed)." placeholder:"N" group:"Safety"`
	VelocityFile    string        `help:"File holding the velocity, re-read every iteration (team mode default: worker-<n>.velocity in the team directory)." placeholder:"FILE" group:"Safety"`
	Heartbeat       time.Duration `help:"How often the worker record's heartbeat is refreshed." default:"5s" group:"Safety"`
	ModelRetryWait  time.Duration `help:"A step's model call that failed in a passing way after pg-llm's own retries (connection reset mid-answer, overloaded, 5xx, rate limit, timeout) is made again after this pause, and once more after three times it, before the task fails; each call passes the budgets again (0: the task fails at once)." default:"10s" placeholder:"DURATION" group:"Safety"`
	Guard           string        `help:"Exfiltration guard: a tool call whose arguments carry a URL (or a key-shaped string) that first appeared in untrusted tool output (MCP tools, external tools, network commands), or a Markdown image from such a URL in the final answer, is reported as a guard event. warn: report only; strict: also refuse the call with a tool error the model reads (and remove the image from the task's result); off: no checks. Untrusted output always reaches the model wrapped in <untrusted source=\"TOOL\">." config:"guard" env:"POWERGLIDE_GUARD" enum:"off,warn,strict" default:"warn" placeholder:"MODE" group:"Safety"`

	ContextWindow int     `help:"The model's context window in tokens. No request is sent that the loop estimates over it, less max_tokens and the reserve (the usable window): past --context-soft old tool outputs are pruned, past --context-hard older turns are summarized, and a conversation still over has its long texts cut; one that cannot fit fails its task, saying so. Tokens are counted with the model's tokenizer when it is known (OpenAI's o200k models), else at 3 bytes a token, raised when the provider counts more (0: off). Default: the model's window from 'pg-llm models', else 200000." config:"loop_context_window" env:"POWERGLIDE_CONTEXT_WINDOW" placeholder:"N" group:"Memory"`
	ContextSoft   float64 `help:"Share of the usable window past which old tool outputs (all but the last few messages) are pruned." config:"loop_context_soft" env:"POWERGLIDE_CONTEXT_SOFT" default:"0.7" placeholder:"F" group:"Memory"`
	ContextHard   float64 `help:"Share of the usable window past which older turns are summarized by the model. A summary that leaves the conversation over it is not made again before a few new messages." config:"loop_context_hard" env:"POWERGLIDE_CONTEXT_HARD" default:"0.9" placeholder:"F" group:"Memory"`
	ToolOutputMax int     `help:"Tokens of one tool output kept in the conversation: a longer one keeps its head and tail, and the whole text is saved (0600) in outputs/ of the session, a file the model is told about and the read tool may open (0: a quarter of the usable window)." config:"loop_tool_output_max" env:"POWERGLIDE_TOOL_OUTPUT_MAX" default:"0" placeholder:"N" group:"Memory"`
	Reserve       int     `help:"Tokens kept free in the window besides max_tokens." default:"2048" group:"Memory"`
	Resume        string  `help:"Resume a session by id, in its workdir wherever pg-loop is started (-C given moves the session there): its unfinished tasks run first (the one in progress from where it stopped), then the tasks of --task or --tasks, added after them with ids of their own. A session whose workdir is gone needs -C. A session another pg-loop still runs is refused with exit 3 (nothing to do), naming its pid: one process drives a session at a time." placeholder:"ID" group:"Memory"`
	Continue      bool    `help:"Resume the latest session of this workdir (as --resume): exit 3 when it is still running (a cron run that overlaps the last one skips)." group:"Memory"`
	SessionID     string  `name:"session-id" help:"Start a new session with this id (letters, digits, '.', '_', '-'); exit 2 if it exists." placeholder:"ID" group:"Memory"`
	Fork          string  `help:"Start a new session from a copy of session ID's history (its memory, tasks and options), recording ID as its parent; the two then go their own ways. It works in ID's workdir, or in -C when given. With --task, the new tasks are added as with --resume." placeholder:"ID" group:"Memory"`
	NoSession     bool    `help:"Keep no session: nothing is written under $POWERGLIDE_HOME/sessions." group:"Memory"`

	JSON bool `help:"Write JSON Lines even on a terminal."`

	Ask []string `help:"Tool calls matching PATTERN wait for approval (repeatable): a glob on the tool name, optionally ':' and a wildcard matched against each string argument, e.g. 'bash:git push*', 'write:*.env', 'mcp__*'. pg-loop serve emits an approval event and waits for approve or deny; a team worker shows it in its worker record for pg-dash or pg-loop approve; any other run denies it with a tool result the model reads." placeholder:"PATTERN" sep:"none" group:"Safety"`

	serving          bool `kong:"-"` // pg-loop serve: tasks come from commands on stdin
	maxVerifySet     bool `kong:"-"` // --max-verify was given (now or in the resumed run)
	contextWindowSet bool `kong:"-"` // the window was configured: else the model's
}

// Run builds the components and runs the loop.
func (c *RunCmd) Run(rt *cli.Runtime, kctx *kong.Context) error {
	cfg, err := rt.Config()
	if err != nil {
		return err
	}
	home := cfg.String("home")
	text := !rt.IO.JSON(c.JSON) && !c.serving
	rt.JSON = !text
	workdir, given, err := c.settle(rt, cfg, kctx)
	if err != nil {
		return err
	}
	// A resumed session brings back its run's options, for the flags not
	// given again.
	if err := c.checkSession(home); err != nil {
		return err
	}
	base, replay, workdir, err := c.resumed(home, workdir, given)
	if err != nil {
		return err
	}
	if base != nil && c.Fork != "" {
		defer base.Close()
	}
	o, err := c.options(rt, workdir)
	if err != nil {
		return err
	}
	o.Resume = replay
	o.Verifier = c.verifier(rt)
	if o.Commit {
		// Before the model runs: its tools can write .git.
		if o.Repo, err = loop.OpenRepo(rt.Ctx, workdir, toolsEnv(rt)); err != nil {
			return cli.Usagef("--commit: %v", err)
		}
	}
	src, err := c.source(rt, &o, home, workdir, base, replay)
	if err != nil {
		return err
	}
	// pg-loop serve: tasks, approvals and steering come from commands.
	var ctl *loop.Control
	if c.serving {
		ctl = c.control(replay)
		src, o.Approver, o.Control = ctl, ctl, ctl
	}
	o.Source = src
	if o.Ask, err = loop.ParseAsk(c.Ask); err != nil {
		return cli.Usagef("%v", err)
	}
	sess, err := c.session(rt, home, workdir, base, src, time.Now())
	if err != nil {
		return err
	}
	o.Session = sess
	if sess != nil {
		defer sess.Close()
	}
	work, err := c.workDir(sess, &o)
	if err != nil {
		return err
	}
	if sess == nil {
		defer os.RemoveAll(work)
	}
	llm, tools := c.components(rt, workdir, filepath.Join(work, "outputs"), o.VelocityFile)
	defer llm.Close()
	defer tools.Close()
	o.LLM, o.Tools = llm, tools
	c.lookup(cfg, &o, llm, workdir)
	o.Events = loop.NewEmitter(rt.IO.Out, text)
	r, err := loop.NewRunner(o)
	if err != nil {
		return err
	}
	if ctl != nil {
		c.serveCommands(rt, ctl, r, o.Events)
	}
	return c.outcome(rt, o.Events, r.Run(rt.Ctx))
}

// settle reads what the environment and the configuration add to the
// flags: the monitor's team and worker, the absolute working directory,
// and which flags the command line gave.
func (c *RunCmd) settle(rt *cli.Runtime, cfg *config.Config, kctx *kong.Context) (workdir string, given func(string) bool, err error) {
	if err := c.checkMonitorTeam(rt.IO.Getenv); err != nil {
		return "", nil, err
	}
	if c.Team == "" {
		c.Team = rt.IO.Getenv("POWERGLIDE_TEAM")
	}
	if c.Worker == "" {
		c.Worker = rt.IO.Getenv("POWERGLIDE_WORKER")
	}
	if workdir, err = filepath.Abs(c.Workdir); err != nil {
		return "", nil, err
	}
	given = flagsGiven(kctx, cfg)
	c.resolve(cfg)
	c.maxVerifySet = given("max-verify")
	return workdir, given, nil
}

// resumed opens the session a run goes on from, base: the resumed one
// (--resume, or the latest with --continue) or the parent of a fork
// (whose copy is made once the flags are checked), with what it had in
// progress; its saved options fill the flags not given again, and the
// run works in its workdir unless -C is given (see sessionWorkdir). No
// flag: nil, nil and workdir as it was.
func (c *RunCmd) resumed(home, workdir string, given func(string) bool) (base *loop.Session, replay *loop.Replay, dir string, err error) {
	if c.Continue {
		id, err := loop.LatestSession(home, workdir)
		if err != nil {
			return nil, nil, "", cli.Nothingf("--continue: %v", err)
		}
		c.Resume = id
	}
	id, flag := c.Resume, "--resume"
	if c.Fork != "" {
		id, flag = c.Fork, "--fork"
	}
	if id == "" {
		return nil, nil, workdir, nil
	}
	if base, err = loop.OpenSession(home, id); err != nil {
		return nil, nil, "", cli.Usagef("%s: %v", flag, err)
	}
	fail := func(err error) (*loop.Session, *loop.Replay, string, error) {
		base.Close()
		return nil, nil, "", err
	}
	if c.Fork == "" {
		// Before its memory is read: what a driver still running would
		// append is not this run's to replay.
		if err := base.Lock(); err != nil {
			var busy *loop.BusyError
			if c.Continue {
				flag = "--continue"
			}
			if errors.As(err, &busy) {
				return fail(cli.Nothingf("%s: %v", flag, err))
			}
			return fail(cli.Failf("session", "%s: %v", flag, err))
		}
	}
	if replay, err = base.LoadReplay(); err != nil {
		return fail(cli.Failf("session", "%s %s: %v", flag, id, err))
	}
	if c.Fork != "" && base.Info.Team != "" {
		return fail(cli.Usagef("--fork: session %s is a team worker's: its tasks belong to team %s's queue", id, base.Info.Team))
	}
	if dir, err = sessionWorkdir(base, flag, workdir, given("workdir")); err != nil {
		return fail(err)
	}
	if len(base.Info.Options) > 0 {
		var saved savedOptions
		if err := json.Unmarshal(base.Info.Options, &saved); err == nil {
			c.restore(saved, given)
		}
	}
	return base, replay, dir, nil
}

// sessionWorkdir is where a resumed or forked run works: the session's
// workdir, where its tools, verify and commit ran, wherever pg-loop is
// started; with -C (given), that directory instead: a flag given again
// wins, as for every saved option, and the session (or the fork) records
// it as its workdir. A session whose workdir is gone needs -C.
func sessionWorkdir(base *loop.Session, flag, workdir string, given bool) (string, error) {
	if given || base.Info.Workdir == "" {
		return workdir, nil
	}
	dir := base.Info.Workdir
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", cli.Usagef("%s %s: the session's workdir %s is gone: give -C DIR to work elsewhere", flag, base.Info.ID, dir)
	}
	return dir, nil
}

// options are the runner's options from the flags, checked.
func (c *RunCmd) options(rt *cli.Runtime, workdir string) (loop.Options, error) {
	o := loop.Options{
		Workdir:         workdir,
		Model:           c.Model,
		MaxTokens:       c.MaxTokens,
		Verify:          c.Verify,
		VerifyTimeout:   c.VerifyTimeout,
		MaxVerify:       c.MaxVerify,
		MaxVerifySet:    c.maxVerifySet,
		Commit:          c.Commit,
		Fresh:           c.Fresh,
		Promise:         c.Promise,
		MaxIterations:   c.MaxIterations,
		MaxSteps:        c.MaxSteps,
		BreakerSame:     c.BreakerRepeat,
		BreakerFailures: c.BreakerFailures,
		BreakerOutput:   c.BreakerOutput,
		BreakerCycle:    c.BreakerCycle,
		Budget:          loop.Budget{Tokens: c.BudgetTokens, USD: c.BudgetUSD},
		VelocityFile:    c.VelocityFile,
		ContextWindow:   c.ContextWindow,
		ContextSoft:     c.ContextSoft,
		ContextHard:     c.ContextHard,
		ToolOutputMax:   c.ToolOutputMax,
		NoContextFiles:  c.NoContextFiles,
		NoSkills:        c.NoSkills,
		Getenv:          rt.IO.Getenv,
		Reserve:         c.Reserve,
		Heartbeat:       c.Heartbeat,
		ModelRetryWait:  c.ModelRetryWait,
		Stderr:          rt.IO.Err,
	}
	if err := c.check(&o); err != nil {
		return o, err
	}
	mode, err := guard.ParseMode(c.Guard)
	if err != nil {
		return o, cli.Usagef("--guard: %v", err)
	}
	o.Guard = guard.New(mode)
	if c.Velocity != "" {
		v, err := strconv.ParseFloat(c.Velocity, 64)
		if err != nil || teamdir.CheckVelocity(v) != nil { // NaN and +Inf too
			return o, cli.Usagef("--velocity: expected a number ≥ 0, got %q", c.Velocity)
		}
		o.Velocity, o.VelocitySet = v, true
	}
	if c.System != "" {
		o.System = c.System
		if strings.HasPrefix(c.System, "@") {
			b, err := os.ReadFile(c.System[1:])
			if err != nil {
				return o, cli.Usagef("--system: %v", err)
			}
			o.System = string(b)
		}
	}
	return o, nil
}

// session is the run's session, which it records in as it goes (nil with
// --no-session): the resumed one, a fork of base or a new one, holding
// what a later --resume needs (tasks, team, options).
func (c *RunCmd) session(rt *cli.Runtime, home, workdir string, base *loop.Session, src loop.Source, now time.Time) (*loop.Session, error) {
	if c.NoSession {
		return nil, nil
	}
	sess, err := c.openSession(home, workdir, base, now)
	if err != nil {
		return nil, err
	}
	if ls, ok := src.(*loop.ListSource); ok {
		sess.Info.Tasks = ls.Snapshot()
	}
	sess.Info.Team, sess.Info.Worker, sess.Info.Pipeline = c.Team, c.Worker, c.Pipeline
	if b, err := json.Marshal(c.saved()); err == nil {
		sess.Info.Options = b
	}
	msg := "session " + sess.Info.ID
	if sess.Info.Parent != "" {
		msg += ", forked from " + sess.Info.Parent
	}
	// A resume given -C elsewhere moves the session there.
	if sess.Info.Workdir != workdir {
		msg += fmt.Sprintf(", now working in %s (was %s)", workdir, sess.Info.Workdir)
		sess.Info.Workdir = workdir
	}
	fmt.Fprintf(rt.IO.Err, "pg-loop: %s\n", msg)
	return sess, nil
}

// workDir holds the run's velocity file and the whole text of cut tool
// outputs: the session's directory, or with --no-session a temporary one
// that the caller removes at the end. The velocity file is made there
// unless --velocity-file names one: the tools (and the model's bash) find
// it in their environment, and it exists, so that the sandbox can let
// them write it to slow the run down.
func (c *RunCmd) workDir(sess *loop.Session, o *loop.Options) (string, error) {
	work := ""
	if sess != nil {
		work = sess.Dir
	} else {
		var err error
		if work, err = os.MkdirTemp("", "pg-loop-"); err != nil {
			return "", cli.Failf("session", "%v", err)
		}
	}
	if o.VelocityFile == "" {
		o.VelocityFile = filepath.Join(work, "velocity")
	}
	if f, err := os.OpenFile(o.VelocityFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
		f.Close()
	}
	return work, nil
}

// outcome maps the run's result to the command's exit: a signal, lost
// output, a failure, a limit, failed tasks, or nothing to claim.
func (c *RunCmd) outcome(rt *cli.Runtime, events *loop.Emitter, res loop.Result) error {
	if res.Signal {
		if rt.Ctx.Err() != nil {
			return rt.Ctx.Err()
		}
		return res.Err
	}
	if err := events.Err(); err != nil {
		return cli.Failf("output", "write events: %v", err)
	}
	// The events already tell what went wrong (in JSON mode the runner wrote
	// the failure's error record before the summary), and the end marker
	// must stay the last stdout line: the error goes to stderr only, in the
	// shared format.
	rt.JSON = false
	switch {
	case res.State == loop.Failed:
		code, kind, msg := res.Failure()
		return &cli.Error{Code: code, Kind: kind, Err: errors.New(msg)}
	case res.Limit:
		return cli.Limitf("a limit stopped %d of %d tasks", res.Failed, res.Failed+res.TasksDone)
	case res.Failed > 0:
		return cli.Failf("task", "%d of %d tasks failed", res.Failed, res.Failed+res.TasksDone)
	case res.Idle:
		return cli.Nothingf("no claimable task within --idle-wait %s; the queue is not drained: %s", c.IdleWait, res.IdleLeft)
	}
	return nil
}

// flagsGiven reports which flags the command line gave, by flag name. A
// config-backed flag counts when its value came from the flag layer.
func flagsGiven(kctx *kong.Context, cfg *config.Config) func(string) bool {
	set := map[string]bool{}
	if kctx != nil {
		for _, p := range kctx.Path {
			if p.Flag == nil {
				continue
			}
			if key := p.Flag.Tag.Get("config"); key != "" {
				set[p.Flag.Name] = cfg.Get(key).Source == config.SourceFlag
				continue
			}
			set[p.Flag.Name] = true
		}
	}
	return func(name string) bool { return set[name] }
}

// resolve puts the configuration's values (flag, environment, file or
// default) in the config-backed fields.
func (c *RunCmd) resolve(cfg *config.Config) {
	c.MaxTokens = cfg.Int("max_tokens")
	c.MaxSteps = cfg.Int("loop_max_steps")
	c.BudgetTokens = cfg.Int("loop_budget_tokens")
	c.BudgetUSD = cfg.Float("loop_budget_usd")
	c.Guard = cfg.String("guard")
	c.Lease = cfg.Duration("lease").String()
	c.BreakerRepeat = cfg.Int("loop_breaker_repeat")
	c.BreakerFailures = cfg.Int("loop_breaker_failures")
	c.BreakerOutput = cfg.Int("loop_breaker_output")
	c.BreakerCycle = cfg.Int("loop_breaker_cycle")
	c.ContextSoft = cfg.Float("loop_context_soft")
	c.ContextHard = cfg.Float("loop_context_hard")
	c.ToolOutputMax = cfg.Int("loop_tool_output_max")
	c.ContextWindow = 0 // the model's window
	if cfg.Get("loop_context_window").Source != config.SourceDefault {
		c.ContextWindow = cfg.Int("loop_context_window")
		c.contextWindowSet = true
	}
}

// savedOptions are the run options a session keeps, so `--resume ID`
// alone continues the run as it was started. Pointers tell a value saved
// from one a session of an older version did not keep.
type savedOptions struct {
	LLM             string            `json:"llm,omitempty"`
	LLMServe        string            `json:"llm_serve,omitempty"`
	Tools           string            `json:"tools,omitempty"`
	ToolsServe      string            `json:"tools_serve,omitempty"`
	ToolsList       string            `json:"tools_list,omitempty"`
	Queue           string            `json:"queue,omitempty"`
	Lease           string            `json:"lease,omitempty"`
	IdleWait        *time.Duration    `json:"idle_wait,omitempty"`
	Model           string            `json:"model,omitempty"`
	MaxTokens       *int              `json:"max_tokens,omitempty"`
	System          string            `json:"system,omitempty"`
	Verify          string            `json:"verify,omitempty"`
	VerifyTimeout   *time.Duration    `json:"verify_timeout,omitempty"`
	MaxVerify       *int              `json:"max_verify,omitempty"`
	MaxVerifySet    bool              `json:"max_verify_set,omitempty"`
	Commit          *bool             `json:"commit,omitempty"`
	Fresh           *bool             `json:"fresh,omitempty"`
	Promise         string            `json:"promise,omitempty"`
	MaxIterations   *int              `json:"max_iterations,omitempty"`
	MaxSteps        *int              `json:"max_steps,omitempty"`
	BreakerRepeat   *int              `json:"breaker_repeat,omitempty"`
	BreakerFailures *int              `json:"breaker_failures,omitempty"`
	BreakerOutput   *int              `json:"breaker_output,omitempty"`
	BreakerCycle    *int              `json:"breaker_cycle,omitempty"`
	BudgetTokens    *int              `json:"budget_tokens,omitempty"`
	BudgetUSD       *float64          `json:"budget_usd,omitempty"`
	Velocity        string            `json:"velocity,omitempty"`
	VelocityFile    string            `json:"velocity_file,omitempty"`
	Heartbeat       *time.Duration    `json:"heartbeat,omitempty"`
	ContextWindow   *int              `json:"context_window,omitempty"` // only when set: else the model's
	Reserve         *int              `json:"reserve,omitempty"`
	ContextSoft     *float64          `json:"context_soft,omitempty"`
	ContextHard     *float64          `json:"context_hard,omitempty"`
	ToolOutputMax   *int              `json:"tool_output_max,omitempty"`
	NoContextFiles  *bool             `json:"no_context_files,omitempty"`
	NoSkills        *bool             `json:"no_skills,omitempty"`
	Ask             []string          `json:"ask,omitempty"`
	Veto            string            `json:"veto,omitempty"`
	ToolParallel    *int              `json:"tool_parallel,omitempty"`
	Var             map[string]string `json:"var,omitempty"`
}

// saved are the options a session keeps. The paths in them are made
// absolute (component programs as callerPath does, --system @FILE,
// --velocity-file): a resume may start anywhere.
func (c *RunCmd) saved() savedOptions {
	system, velocity := c.System, c.VelocityFile
	if f, ok := strings.CutPrefix(system, "@"); ok {
		if abs, err := filepath.Abs(f); err == nil {
			system = "@" + abs
		}
	}
	if velocity != "" {
		if abs, err := filepath.Abs(velocity); err == nil {
			velocity = abs
		}
	}
	s := savedOptions{LLM: callerPath(c.LLM), LLMServe: callerPath(c.LLMServe), Tools: callerPath(c.Tools), ToolsServe: callerPath(c.ToolsServe), ToolsList: callerPath(c.ToolsList),
		Queue: c.Queue, Lease: c.Lease, IdleWait: &c.IdleWait,
		Model: c.Model, MaxTokens: &c.MaxTokens, System: system, Verify: c.Verify, VerifyTimeout: &c.VerifyTimeout,
		MaxVerify: &c.MaxVerify, MaxVerifySet: c.maxVerifySet, Commit: &c.Commit, Fresh: &c.Fresh, Promise: c.Promise,
		MaxIterations: &c.MaxIterations, MaxSteps: &c.MaxSteps, BreakerRepeat: &c.BreakerRepeat, BreakerFailures: &c.BreakerFailures,
		BreakerOutput: &c.BreakerOutput, BreakerCycle: &c.BreakerCycle,
		BudgetTokens: &c.BudgetTokens, BudgetUSD: &c.BudgetUSD, Velocity: c.Velocity, VelocityFile: velocity,
		Heartbeat: &c.Heartbeat, Reserve: &c.Reserve, ToolParallel: &c.ToolParallel, Var: c.Var,
		ContextSoft: &c.ContextSoft, ContextHard: &c.ContextHard, ToolOutputMax: &c.ToolOutputMax, NoContextFiles: &c.NoContextFiles, NoSkills: &c.NoSkills, Ask: c.Ask, Veto: c.Veto}
	if c.contextWindowSet {
		s.ContextWindow = &c.ContextWindow
	}
	return s
}

// pick takes a saved value for a flag not given on the command line.
func pick[T any](cur *T, given bool, saved *T) {
	if !given && saved != nil {
		*cur = *saved
	}
}

// restore takes the saved run's options for every flag the command line
// did not give (given reports it by flag name): a flag given again wins,
// whatever its value. Components given again replace the saved ones as a
// pair (--llm or --llm-serve; --tools or --tools-serve).
func (c *RunCmd) restore(s savedOptions, given func(string) bool) {
	str := func(cur *string, flag, v string) {
		if !given(flag) && v != "" {
			*cur = v
		}
	}
	if !given("llm") && !given("llm-serve") {
		c.LLM, c.LLMServe = s.LLM, s.LLMServe
	}
	if !given("tools") && !given("tools-serve") && !given("tools-list") {
		c.Tools, c.ToolsServe, c.ToolsList = s.Tools, s.ToolsServe, s.ToolsList
	}
	str(&c.Queue, "queue", s.Queue)
	str(&c.Lease, "lease", s.Lease)
	str(&c.Model, "model", s.Model)
	str(&c.System, "system", s.System)
	str(&c.Verify, "verify", s.Verify)
	str(&c.Promise, "promise", s.Promise)
	str(&c.Velocity, "velocity", s.Velocity)
	str(&c.VelocityFile, "velocity-file", s.VelocityFile)
	pick(&c.IdleWait, given("idle-wait"), s.IdleWait)
	pick(&c.MaxTokens, given("max-tokens"), s.MaxTokens)
	pick(&c.VerifyTimeout, given("verify-timeout"), s.VerifyTimeout)
	pick(&c.MaxVerify, given("max-verify"), s.MaxVerify)
	if !given("max-verify") {
		c.maxVerifySet = s.MaxVerifySet
	}
	pick(&c.Commit, given("commit"), s.Commit)
	pick(&c.Fresh, given("fresh"), s.Fresh)
	pick(&c.MaxIterations, given("max-iterations"), s.MaxIterations)
	pick(&c.MaxSteps, given("max-steps"), s.MaxSteps)
	pick(&c.BreakerRepeat, given("breaker-repeat"), s.BreakerRepeat)
	pick(&c.BreakerFailures, given("breaker-failures"), s.BreakerFailures)
	pick(&c.BreakerOutput, given("breaker-output"), s.BreakerOutput)
	pick(&c.BreakerCycle, given("breaker-cycle"), s.BreakerCycle)
	pick(&c.BudgetTokens, given("budget-tokens"), s.BudgetTokens)
	pick(&c.BudgetUSD, given("budget-usd"), s.BudgetUSD)
	pick(&c.Heartbeat, given("heartbeat"), s.Heartbeat)
	pick(&c.Reserve, given("reserve"), s.Reserve)
	pick(&c.ContextSoft, given("context-soft"), s.ContextSoft)
	pick(&c.ContextHard, given("context-hard"), s.ContextHard)
	pick(&c.ToolOutputMax, given("tool-output-max"), s.ToolOutputMax)
	pick(&c.NoContextFiles, given("no-context-files"), s.NoContextFiles)
	pick(&c.NoSkills, given("no-skills"), s.NoSkills)
	if !given("ask") && len(s.Ask) > 0 {
		c.Ask = s.Ask
	}
	str(&c.Veto, "veto", s.Veto)
	pick(&c.ToolParallel, given("tool-parallel"), s.ToolParallel)
	if !given("context-window") && s.ContextWindow != nil {
		c.ContextWindow, c.contextWindowSet = *s.ContextWindow, true
	}
	if !given("var") && len(s.Var) > 0 {
		c.Var = s.Var
	}
}

// defaultContextWindow is the window of a model pg-llm does not know.
const defaultContextWindow = 200000

// lookup is how the run learns its model's context window and prices
// (loop.ModelLookup), while it starts: the context window is the default
// of --context-window, and the prices let the dollar budget price every
// call before it runs. The model is --model, else, with the default model
// component, pg-llm's configured model; with a component of your own and
// no --model it is unknown. The default component, pg-llm serve, is asked
// for its table itself (a model-list-request): no process of its own; with
// another, `pg-llm models --json` runs beside it.
func (c *RunCmd) lookup(cfg *config.Config, o *loop.Options, llm loop.LLM, workdir string) {
	if !c.contextWindowSet {
		o.ContextWindow = defaultContextWindow
	}
	own := c.LLM != "" || c.LLMServe != ""
	id := c.Model
	if id == "" && !own {
		id = cfg.String("model")
	}
	if id == "" || (o.Budget.USD <= 0 && o.Ledger == nil && c.contextWindowSet) {
		return
	}
	l := &loop.ModelLookup{ID: id, Window: !c.contextWindowSet}
	if s, ok := llm.(*loop.ServeLLM); ok && !own {
		l.Table = s.Models
	} else {
		cmd := loop.SiblingCommand("pg-llm", "models --json")
		l.Table = func(ctx context.Context) ([]loop.ModelInfo, error) { return loop.ReadModels(ctx, cmd, workdir) }
	}
	o.Lookup = l
}

func (c *RunCmd) check(o *loop.Options) error {
	n := 0
	for _, set := range []bool{len(c.Task) > 0, c.Tasks != "", c.Team != "", c.Pipeline != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return cli.Usagef("give one task source: --task, --tasks, --team or --pipeline")
	}
	if c.serving && n > 0 {
		return cli.Usagef("pg-loop serve takes its tasks from prompt and follow_up commands on stdin, not from --task, --tasks, --team or --pipeline")
	}
	if n == 0 && c.Resume == "" && !c.Continue && c.Fork == "" && !c.serving {
		return cli.Usagef("no tasks: give --task TEXT, --tasks FILE, --team T --worker N or --pipeline FILE")
	}
	if c.LLM != "" && c.LLMServe != "" {
		return cli.Usagef("give --llm or --llm-serve, not both")
	}
	if c.Tools != "" && c.ToolsServe != "" {
		return cli.Usagef("give --tools or --tools-serve, not both")
	}
	if c.Team != "" {
		if err := teamdir.ValidName("team", c.Team); err != nil {
			return cli.Usagef("%v", err)
		}
		if c.Worker == "" {
			return cli.Usagef("team mode needs --worker N (or POWERGLIDE_WORKER)")
		}
		if err := teamdir.ValidName("worker", c.Worker); err != nil {
			return cli.Usagef("%v", err)
		}
	}
	for name, v := range map[string]int{"--max-steps": o.MaxSteps, "--max-verify": o.MaxVerify, "--max-iterations": o.MaxIterations, "--budget-tokens": o.Budget.Tokens,
		"--breaker-repeat": o.BreakerSame, "--breaker-failures": o.BreakerFailures, "--breaker-output": o.BreakerOutput, "--breaker-cycle": o.BreakerCycle, "--context-window": o.ContextWindow, "--reserve": o.Reserve, "--max-tokens": o.MaxTokens, "--tool-parallel": c.ToolParallel} {
		if v < 0 {
			return cli.Usagef("%s must not be negative", name)
		}
	}
	if o.MaxTokens == 0 {
		// Requests would go out with pg-llm's default while the budgets
		// and the context window counted no output at all.
		return cli.Usagef("--max-tokens must be at least 1: the budgets and the context window count it")
	}
	if o.Budget.USD < 0 {
		return cli.Usagef("--budget-usd must not be negative")
	}
	if c.ContextSoft <= 0 || c.ContextHard <= 0 || c.ContextSoft > c.ContextHard || c.ContextHard > 1 {
		return cli.Usagef("--context-soft %g and --context-hard %g must be shares of the window with 0 < soft ≤ hard ≤ 1", c.ContextSoft, c.ContextHard)
	}
	if c.ToolOutputMax < 0 {
		return cli.Usagef("--tool-output-max must not be negative")
	}
	if c.Veto != "" && (c.Tools != "" || c.ToolsServe != "") {
		return cli.Usagef("--veto sets up the default tools component (pg-tool serve --verify CMD); with --tools or --tools-serve, give --verify CMD to your own pg-tool")
	}
	if c.TeamBudgetUSD != nil {
		if v := *c.TeamBudgetUSD; v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return cli.Usagef("--team-budget-usd must be a finite number that is not negative, got %v", v)
		}
		if c.Team == "" {
			return cli.Usagef("--team-budget-usd needs team mode: --team T --worker N")
		}
	}
	for _, t := range c.Task {
		if strings.TrimSpace(t) == "" {
			return cli.Usagef("--task: the prompt is empty")
		}
	}
	return nil
}

func (c *RunCmd) source(rt *cli.Runtime, o *loop.Options, home, workdir string, sess *loop.Session, replay *loop.Replay) (loop.Source, error) {
	switch {
	case c.Team != "" || (sess != nil && sess.Info.Team != "" && len(c.Task) == 0 && c.Tasks == ""):
		if c.Team == "" {
			c.Team, c.Worker = sess.Info.Team, sess.Info.Worker
		}
		d, err := teamdir.New(home, c.Team)
		if err != nil {
			return nil, cli.Usagef("%v", err)
		}
		// The directory on this host holds the worker's log and velocity
		// file whatever the store.
		if err := d.Ensure(); err != nil {
			if u := cli.UsageError(nil); errors.As(err, &u) && u.BadInput() {
				return nil, err // another user could change it (teamdir.Check)
			}
			return nil, cli.Failf("team", "%v", err)
		}
		cfg, err := rt.Config()
		if err != nil {
			return nil, err
		}
		st, tm, err := dial.Team(rt.Ctx, cfg, storeOptions(rt, cfg), c.Team)
		if err != nil {
			return nil, err
		}
		rt.Defer(func() { st.Close() })
		lease, err := time.ParseDuration(c.Lease)
		if err != nil || lease <= 0 {
			return nil, cli.Usagef("--lease must be a positive duration, got %q", c.Lease)
		}
		q := c.Queue
		if q == "" {
			q = loop.SiblingCommand("pg-queue", "")
		}
		o.Team, o.Worker, o.Lease, o.IdleWait, o.Home = tm, c.Worker, lease, c.IdleWait, home
		if c.TeamBudgetUSD != nil {
			tb, err := ledger.SetBudget(rt.Ctx, tm, *c.TeamBudgetUSD, time.Now())
			if err != nil {
				return nil, cli.Failf("team", "team budget: %v", err)
			}
			fmt.Fprintf(rt.IO.Err, "pg-loop: team %s budget $%.4f, $%.4f spent\n", c.Team, tb.BudgetUSD, tb.SpentUSD)
		}
		proc.WarnNoHostID(rt.IO.Err, "pg-loop")
		host := proc.ThisHost()
		host.Shared = store.Shared(st)
		o.Ledger = ledger.New(tm, c.Worker, host)
		if o.VelocityFile == "" {
			o.VelocityFile = d.Velocity(c.Worker)
		}
		var env []string
		if u := cfg.String("store"); u != "" {
			env = append(os.Environ(), "POWERGLIDE_STORE="+u)
		}
		return &loop.QueueSource{Cmdline: strings.TrimSpace(q), Team: c.Team, Worker: c.Worker, Lease: lease, Dir: workdir, Env: env, Stderr: rt.IO.Err}, nil
	case c.Pipeline != "" || (sess != nil && sess.Info.Pipeline != "" && len(c.Task) == 0 && c.Tasks == ""):
		if c.Pipeline == "" {
			c.Pipeline = sess.Info.Pipeline
		}
		p, err := loop.ReadPipeline(c.Pipeline)
		if err != nil {
			return nil, cli.Usagef("--pipeline: %v", err)
		}
		if p.Vars == nil {
			p.Vars = map[string]string{}
		}
		for k, v := range c.Var {
			p.Vars[k] = v
		}
		state := c.PipelineState
		if state == "" {
			state = loop.DefaultPipelineState(home, c.Pipeline, workdir)
		}
		ps, err := loop.OpenPipeline(p, state, workdir, c.PipelineReset)
		if err != nil {
			return nil, cli.Failf("pipeline", "%v", err)
		}
		ps.Verifier = o.Verifier
		abs, _ := filepath.Abs(c.Pipeline)
		c.Pipeline = abs
		fmt.Fprintf(rt.IO.Err, "pg-loop: pipeline %s state in %s\n", p.Name, state)
		return ps, nil
	case len(c.Task) > 0:
		now := time.Now().UTC()
		var ts []protocol.Task
		for i, t := range c.Task {
			in := loop.TaskInput{ID: fmt.Sprintf("task-%d", i+1), Prompt: t}
			if sess != nil {
				// Added to a session that goes on: a follow-up.
				in.Labels = map[string]string{loop.LabelFollowUp: "true"}
			}
			ts = append(ts, loop.NewTask(in, now))
		}
		return c.listSource(sess, replay, ts)
	case c.Tasks != "":
		in, name := rt.IO.In, "stdin"
		if c.Tasks != "-" {
			f, err := os.Open(c.Tasks)
			if err != nil {
				return nil, cli.Usagef("--tasks: %v", err)
			}
			defer f.Close()
			in, name = f, c.Tasks
		}
		ts, err := loop.ReadTasks(in, name)
		if err != nil {
			return nil, err
		}
		if len(ts) == 0 {
			return nil, cli.Nothingf("--tasks: no tasks in %s", name)
		}
		return c.listSource(sess, replay, ts)
	default: // a resumed --task/--tasks session
		return c.listSource(sess, replay, nil)
	}
}

// listSource is the task list of a run: the new tasks, after the tasks of
// the session the run goes on from (sess, when resumed or forked), none
// dropped and no id used twice.
func (c *RunCmd) listSource(sess *loop.Session, replay *loop.Replay, add []protocol.Task) (loop.Source, error) {
	if sess == nil {
		return &loop.ListSource{Tasks: add}, nil
	}
	used := map[string]bool{}
	for id := range replay.Ended {
		used[id] = true
	}
	if replay.Current != nil {
		used[replay.Current.ID] = true
	}
	ts, err := loop.AppendTasks(loop.ResumedTasks(&sess.Info, replay), add, used)
	if err != nil {
		return nil, cli.Usagef("session %s: %v", sess.Info.ID, err)
	}
	return &loop.ListSource{Tasks: ts}, nil
}

// checkSession checks the session flags before anything is changed.
func (c *RunCmd) checkSession(home string) error {
	n := 0
	for _, set := range []bool{c.Resume != "", c.Continue, c.Fork != ""} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return cli.Usagef("give one of --resume, --continue and --fork")
	case c.NoSession && (n > 0 || c.SessionID != ""):
		return cli.Usagef("--no-session keeps no session: it cannot go with --resume, --continue, --fork or --session-id")
	case c.SessionID != "" && (c.Resume != "" || c.Continue):
		return cli.Usagef("--session-id names a new session: give it alone or with --fork, not with --resume or --continue")
	}
	if c.SessionID != "" {
		if err := teamdir.ValidName("session", c.SessionID); err != nil {
			return cli.Usagef("--session-id: %v", err)
		}
		if loop.SessionExists(home, c.SessionID) {
			return cli.Usagef("--session-id: session %s already exists (--resume %s goes on with it)", c.SessionID, c.SessionID)
		}
	}
	if c.Fork != "" {
		if err := teamdir.ValidName("session", c.Fork); err != nil {
			return cli.Usagef("--fork: %v", err)
		}
	}
	return nil
}

// openSession is the run's session: the resumed one, a fork of base, or a
// new one (named by --session-id).
func (c *RunCmd) openSession(home, workdir string, base *loop.Session, now time.Time) (*loop.Session, error) {
	var sess *loop.Session
	var err error
	switch {
	case c.Resume != "":
		return base, nil
	case c.Fork != "":
		sess, err = loop.ForkSession(home, base, c.SessionID, workdir, now)
	default:
		sess, err = loop.CreateSessionID(home, workdir, c.SessionID, now)
	}
	var ee *loop.ExistsError
	if errors.As(err, &ee) {
		return nil, cli.Usagef("--session-id: %v", err)
	}
	if err != nil {
		return nil, cli.Failf("session", "%v", err)
	}
	return sess, nil
}

func (c *RunCmd) components(rt *cli.Runtime, workdir, outputs, velocity string) (llm loop.LLM, tools loop.Tools) {
	if c.LLM != "" {
		llm = &loop.CommandLLM{Cmdline: callerPath(c.LLM), Dir: workdir, Stderr: rt.IO.Err}
	} else {
		cmd := c.LLMServe
		if cmd == "" {
			cmd = loop.SiblingCommand("pg-llm", "serve")
		}
		llm = loop.NewServeLLM(cmd, rt.IO.Err)
	}
	// The tools (and the model's bash) find the velocity file here.
	env := append(toolsEnv(rt), loop.VelocityEnv+"="+velocity)
	if c.NoSkills {
		env = append(env, "POWERGLIDE_NO_SKILLS=1")
	}
	env, scope := c.toolsScope(rt, env)
	if c.Tools != "" {
		// A pg-tool per call reaches only the terminal sessions of its term
		// scope: one scope for the run keeps the model's sessions its own
		// from one call to the next.
		tools = &loop.CommandTools{Cmdline: callerPath(c.Tools), Dir: workdir, Env: env, Stderr: rt.IO.Err}
	} else {
		cmd, list := c.ToolsServe, c.ToolsList
		// pg-tool serve, started by pg-loop, answers a list request itself:
		// no pg-tool list process at launch.
		inband := cmd == "" && list == ""
		if cmd == "" {
			// pg-tool serves one call at a time unless told otherwise; a
			// turn's parallel calls should run together.
			// Full outputs go to the session, where the loop saves the
			// outputs it cuts: the read tool may open both.
			args := fmt.Sprintf("serve --parallel %d --output-dir %s --pass-env %s --allow-write %s", max(c.ToolParallel, 1), shell.Quote(outputs), loop.VelocityEnv, shell.Quote(velocity))
			if c.Veto != "" {
				args += " --verify " + shell.Quote(c.Veto)
			}
			cmd = loop.SiblingCommand("pg-tool", args)
		}
		if list == "" && strings.HasSuffix(strings.TrimSpace(cmd), " serve") {
			list = strings.TrimSuffix(strings.TrimSpace(cmd), "serve") + "list"
		}
		st := loop.NewServeTools(callerPath(cmd), callerPath(list), workdir, env, rt.IO.Err)
		st.Inband = inband
		tools = st
	}
	if scope != "" {
		tools = &scopedTools{Tools: tools, scope: scope, env: env, dir: workdir, stderr: rt.IO.Err}
	}
	return llm, tools
}

// toolsScope gives the run's tools one term scope, when they are pg-tool
// and no scope was given (POWERGLIDE_TERM_SCOPE, shared on purpose): a
// pg-tool per call (--tools) then reaches from one call to the next the
// terminal sessions the model started, a pg-tool serve restarted after it
// died those of the one before, and the sessions end with the run
// (scopedTools). It returns env with the scope.
func (c *RunCmd) toolsScope(rt *cli.Runtime, env []string) ([]string, string) {
	if _, set := rt.IO.LookupEnv("POWERGLIDE_TERM_SCOPE"); set {
		return env, ""
	}
	if cmd := cmp.Or(c.Tools, c.ToolsServe); cmd != "" && !isPgTool(cmd) {
		return env, ""
	}
	scope := runTermScope()
	return append(env, "POWERGLIDE_TERM_SCOPE="+scope), scope
}

// verifier runs the verify commands (--verify, a task's, a pipeline
// stage's command check), which build and run the model's code, in the
// tools' sandbox: pg-tool exec, with the sandbox settings pg-tool serve
// reads (its flags for a --tools-serve 'pg-tool ... serve', the
// environment, the config). A swapped tools component has a sandbox of its
// own, or none, that pg-loop cannot use: verify then runs unconfined, still
// with the tools' environment (no secrets), and pg-loop says so.
func (c *RunCmd) verifier(rt *cli.Runtime) loop.Verifier {
	v := loop.Verifier{Env: toolsEnv(rt)}
	serve := strings.TrimSpace(c.ToolsServe)
	switch {
	case c.Tools == "" && serve == "":
		v.Exec = loop.SiblingCommand("pg-tool", "exec")
	case c.Tools == "" && strings.HasSuffix(serve, " serve") && isPgTool(serve):
		v.Exec = callerPath(strings.TrimSuffix(serve, "serve") + "exec")
	case c.Verify != "" || c.Pipeline != "" || c.Team != "" || c.Tasks != "":
		fmt.Fprintln(rt.IO.Err, "pg-loop: warning: the tools component is not pg-tool: verify commands run unconfined (outside any sandbox), without secrets in their environment")
	}
	return v
}

// isPgTool reports whether cmdline runs pg-tool.
func isPgTool(cmdline string) bool {
	words, ok := shell.Words(cmdline)
	return ok && len(words) > 0 && path.Base(words[0]) == "pg-tool"
}

// runTermScope is the term scope of a run's one-shot tools commands.
func runTermScope() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "pgloop-" + hex.EncodeToString(b)
}

// toolsEnv is the environment of the tools component: pg-loop's own
// without the variables named like secrets (API keys, tokens, passwords),
// so that in a running agent only the model component holds a key. Names
// listed in POWERGLIDE_PASS_ENV (comma-separated) are kept, for a tool
// that needs one (pg-tool --pass-env lets it through to commands).
func toolsEnv(rt *cli.Runtime) []string {
	// The command's environment over the process's: the same in the real
	// binary, and a test's own variables win.
	env := append(os.Environ(), rt.IO.Env...)
	var keep []string
	for _, name := range strings.Split(rt.IO.Getenv("POWERGLIDE_PASS_ENV"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			keep = append(keep, name)
		}
	}
	// The store URL may hold the database's password.
	return secrets.ScrubEnv(dropEnv(env, "POWERGLIDE_STORE"), keep...)
}

// dropEnv removes the variable name from env.
func dropEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// checkMonitorTeam refuses a worker whose --team is not the team of the
// pg-monitor that started it (pg-monitor run sets POWERGLIDE_TEAM and
// POWERGLIDE_WORKER): the monitor would keep its worker records and logs in
// one team directory while the worker ran the tasks of another.
func (c *RunCmd) checkMonitorTeam(getenv func(string) string) error {
	team, worker := getenv("POWERGLIDE_TEAM"), getenv("POWERGLIDE_WORKER")
	if c.Team == "" || team == "" || worker == "" || c.Team == team {
		return nil
	}
	return cli.Usagef("--team %s is not the team of the pg-monitor that started this worker (POWERGLIDE_TEAM=%s, POWERGLIDE_WORKER=%s): give both the same team (pg-monitor run --team %s ... -- pg-loop --team %s), or drop pg-loop's --team", c.Team, team, worker, c.Team, c.Team)
}

// callerPath makes the program of a component's command line absolute when
// it is a relative path (it holds a slash) to a file that exists from the
// directory pg-loop was started in: --llm and --tools run in -C, but a user
// writes their paths from where they stand.
func callerPath(cmdline string) string {
	prog, _, _ := strings.Cut(strings.TrimSpace(cmdline), " ")
	if prog == "" || filepath.IsAbs(prog) || !strings.Contains(prog, "/") || strings.ContainsAny(prog, "'\"\\$`~*?[") {
		return cmdline
	}
	abs, err := filepath.Abs(prog)
	if err != nil {
		return cmdline
	}
	if _, err := os.Stat(abs); err != nil {
		return cmdline
	}
	rest := strings.TrimPrefix(strings.TrimSpace(cmdline), prog)
	return shell.Quote(abs) + rest
}
