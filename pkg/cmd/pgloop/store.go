package pgloop

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/powerglide/powerglide/pkg/cli"
	"github.com/powerglide/powerglide/pkg/config"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/agent"
	"github.com/powerglide/powerglide/pkg/store/dial"
)

// storeOptions open the team store. pg-loop does not link the PostgreSQL
// driver (its packages' initialisation and memory would weigh on every
// run, store or not): it reaches a PostgreSQL store through the host's
// store agent, pg-queue agent, started on first use, or through a private
// one on pipes when store_agent is off or the host's agent cannot be
// reached (docs/store-agent.md).
func storeOptions(rt *cli.Runtime, cfg *config.Config) dial.Options {
	return dial.Options{Remote: func(ctx context.Context, url string) (store.Store, error) {
		path, err := queueBinary()
		if err != nil {
			return nil, err
		}
		home, err := filepath.Abs(cfg.String("home"))
		if err != nil {
			return nil, err
		}
		return agent.OpenRemote(ctx, agent.RemoteOptions{
			Home: home, URL: url, Env: rt.IO.Env, Path: path, Name: "pg-queue",
			Off: cfg.String("store_agent") == "off", Stderr: rt.IO.Err, Tool: "pg-loop",
		})
	}}
}

// queueBinary is the pg-queue next to pg-loop, else the one on PATH.
func queueBinary() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "pg-queue")
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath("pg-queue")
	if err != nil {
		return "", errors.New("a PostgreSQL store needs pg-queue (next to pg-loop or on PATH), whose store agent opens it")
	}
	return p, nil
}
