package agent_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/agent"
	"github.com/powerglide/powerglide/pkg/store/dial"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
	"github.com/powerglide/powerglide/pkg/store/remote"
)

// An agent that cannot listen (here a directory holds its socket's name)
// fails before it opens the store: it has not connected to the database,
// nor migrated it.
func TestListenFailsBeforeOpen(t *testing.T) {
	home := withHome(t, time.Minute)
	url := pgtest.DB(t)
	path := socketPath(home, url)
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	opened := 0
	err := agent.Serve(context.Background(), agent.ServeOptions{
		Home: home, URL: url, Env: os.Environ(),
		Open: func(ctx context.Context) (store.Store, error) {
			opened++
			return dial.OpenContext(ctx, url, dial.Options{})
		},
	})
	if err == nil {
		t.Fatal("an agent served without its socket")
	}
	if opened != 0 {
		t.Fatalf("the agent opened the store (%d times) before it failed to listen: %v", opened, err)
	}
}

// An agent that cannot open its store leaves no socket behind, and a
// client that connected while it tried is hung up on at once, without a
// hello: it connects directly, as the commands after it do.
func TestOpenFailsLeavesNoSocket(t *testing.T) {
	home := withHome(t, time.Minute)
	url := refusedURL(t)
	path := socketPath(home, url)
	const helloWait = time.Minute
	client := make(chan error, 1)
	err := agent.Serve(context.Background(), agent.ServeOptions{
		Home: home, URL: url, Env: os.Environ(),
		Open: func(ctx context.Context) (store.Store, error) {
			// A command comes while the agent opens the store: it finds
			// the socket and waits for the hello.
			conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				return nil, fmt.Errorf("no socket to connect to while opening: %w", err)
			}
			go func() {
				c, err := remote.NewClient(conn, remote.Options{HelloTimeout: helloWait})
				if err == nil {
					c.Close()
					err = errors.New("got a hello")
				}
				client <- err
			}()
			return dial.OpenContext(ctx, url, dial.Options{})
		},
	})
	if err == nil || errors.Is(err, os.ErrNotExist) {
		t.Fatalf("serve: %v, want the store's error", err)
	}
	select {
	case err := <-client:
		if errors.Is(err, os.ErrDeadlineExceeded) || err.Error() == "got a hello" {
			t.Fatalf("the waiting client: %v, want it hung up on", err)
		}
	case <-time.After(helloWait / 2):
		t.Fatal("the waiting client was left waiting for a hello")
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind: %v", err)
	}
	if names, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "store-*.sock*")); len(names) > 0 {
		t.Fatalf("sockets left behind: %v", names)
	}
	if _, err := agent.Open(context.Background(), agent.OpenOptions{Home: home, URL: url, Env: os.Environ()}); err == nil {
		t.Fatal("a client reached an agent that failed to start")
	}
}
