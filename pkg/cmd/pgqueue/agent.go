package pgqueue

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/config"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/agent"
	"github.com/powerglide/powerglide/pkg/store/dial"
	"github.com/powerglide/powerglide/pkg/store/remote"
)

// stdio is stdin and stdout as one connection.
type stdio struct {
	io.Reader
	io.Writer
}

// AgentCmd serves the configured PostgreSQL store to this host's
// commands.
type AgentCmd struct {
	Idle    time.Duration `help:"Exit after this long with no client (default 60s)." config:"store_agent_idle" env:"POWERGLIDE_STORE_AGENT_IDLE" placeholder:"D"`
	ReadyFD int           `name:"ready-fd" hidden:"" help:"Write ready (or error: ...) on this file descriptor once listening, then close it."`
	Stdio   bool          `help:"Serve one client on stdin and stdout instead of the socket, and exit when stdin ends (a private agent, as pg-loop starts one with store_agent=off)."`
}

// Help details agent.
func (c *AgentCmd) Help() string {
	return `On a PostgreSQL store every short pg-queue command (add, claim, renew, complete, fail, release, cancel, list, show, stats, archive, prune) goes through this host's store agent: a pg-queue agent that keeps a small pool of database connections with prepared statements, so a command costs a process start and a local round trip instead of a new server backend and its cold caches. The first command that finds none starts one, detached, and the agent exits after --idle with no client, or when its socket is removed or replaced. Any failure of the agent path makes the command connect to the database itself, so nothing depends on it; store_agent=off (POWERGLIDE_STORE_AGENT=off) turns it off. watch always connects itself. The file store never uses an agent.

The socket is $POWERGLIDE_HOME/run/store-<hash>.sock (the hash over the store URL, the PG* variables, the pg-queue binary's file and the host's name and network namespace: an upgraded pg-queue starts an agent of its own), mode 0600 in a 0700 directory; the agent's log is store-<hash>.log beside it. An agent that starts or exits removes the files there of the agents that no longer run (their logs after a day). A socket or directory owned by another user or open to others, or an agent running as another user, is refused: the command then connects directly, with a warning saying why. The wire protocol is JSON Lines, documented in docs/store-agent.md.

Run by hand it serves in the foreground until idle; there is no need to, except to watch its log. With --stdio it serves one client on stdin and stdout and exits when stdin ends: pg-loop, which does not link the PostgreSQL driver, reaches a PostgreSQL store through the host's agent, or through such a private agent when store_agent is off or the host's agent cannot be reached.

Examples:
  $ pg-queue agent --store postgres://pg@db/powerglide
  $ POWERGLIDE_STORE_AGENT=off pg-queue claim --worker 1`
}

// Run serves the store until idle.
func (c *AgentCmd) Run(rt *cli.Runtime, root *CLI) error {
	var ready *os.File
	if c.ReadyFD > 0 {
		ready = os.NewFile(uintptr(c.ReadyFD), "ready")
	}
	err := c.run(rt, ready)
	if err != nil && ready != nil {
		fmt.Fprintf(ready, "error: %v\n", err)
		ready.Close()
	}
	return err
}

func (c *AgentCmd) run(rt *cli.Runtime, ready *os.File) error {
	cfg, err := rt.Config()
	if err != nil {
		return err
	}
	url := cfg.String("store")
	kind, _, err := dial.Parse(url)
	if err != nil {
		return err
	}
	if kind != "postgres" {
		return cli.Usagef("agent: the store agent serves PostgreSQL stores; the file store needs none")
	}
	if c.Stdio {
		var o dial.Options
		if ns, err := strconv.ParseInt(rt.IO.Getenv(agent.BeganEnv), 10, 64); err == nil {
			o.Began = time.Unix(0, ns)
		}
		st, err := dial.FromConfig(rt.Ctx, cfg, o)
		if err != nil {
			return err
		}
		defer st.Close()
		return remote.Serve(rt.Ctx, stdio{rt.IO.In, rt.IO.Out}, st)
	}
	o := agent.ServeOptions{
		Home: cfg.String("home"), URL: url, Env: rt.IO.Env, Idle: cfg.Duration("store_agent_idle"), Log: rt.IO.Err,
		Open: func(ctx context.Context) (store.Store, error) { return dial.FromConfig(ctx, cfg, dial.Options{}) },
	}
	if ready != nil {
		o.Ready = ready
	}
	return agent.Serve(rt.Ctx, o)
}

// agentTeam opens team through the host's store agent (starting it when
// there is none) when the configuration asks for one; ok is false when
// the command is to connect itself: a file store, store_agent=off, or any
// failure to reach an agent.
func agentTeam(rt *cli.Runtime, cfg *config.Config, direct dial.Options, team string) (store.Store, store.Team, bool) {
	url := cfg.String("store")
	if cfg.String("store_agent") == "off" {
		return nil, nil, false
	}
	if kind, _, err := dial.Parse(url); err != nil || kind != "postgres" {
		return nil, nil, false
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, false
	}
	cl, err := agent.Open(rt.Ctx, agent.OpenOptions{
		Home: cfg.String("home"), URL: url, Env: rt.IO.Env,
		Path: exe, Args: []string{"pg-queue", "agent", fmt.Sprintf("--ready-fd=%d", agent.ReadyFD)},
		Direct: func() (store.Store, error) { return dial.FromConfig(rt.Ctx, cfg, direct) },
	})
	if err != nil {
		agent.WarnRefused(rt.IO.Err, "pg-queue", err)
		return nil, nil, false
	}
	t, err := cl.Team(team)
	if err != nil {
		cl.Close()
		return nil, nil, false
	}
	return cl, t, true
}
