package remote

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/dial"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// TestLostClaimAdoptsItsOwn: a claim whose answer is lost (the agent dies
// between the commit and the reply) is found again by its claim id, on
// PostgreSQL, where the time rule it replaces failed:
//   - the database's clock behind the host's (stood in for by a claim
//     whose lease the agent's store cut short, ending before the time the
//     call was sent plus its lease): the claim was missed, and the command
//     claimed a second task while the first stayed held;
//   - another process claiming under the same worker name just after, with
//     a lease that ends later: its claim was adopted, and two commands
//     printed the same task.
func TestLostClaimAdoptsItsOwn(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	cases := []struct {
		name string
		// claim runs on the agent's store in place of its claim, before
		// the agent dies.
		claim func(q store.Tasks, ctx context.Context, worker string, lease time.Duration) (*protocol.Task, error)
		held  int // tasks claimed in all
	}{
		{"database clock behind", func(q store.Tasks, ctx context.Context, worker string, lease time.Duration) (*protocol.Task, error) {
			return q.WaitClaim(ctx, worker, lease/2, 0)
		}, 1},
		{"same worker name", func(q store.Tasks, ctx context.Context, worker string, lease time.Duration) (*protocol.Task, error) {
			mine, err := q.WaitClaim(ctx, worker, lease, 0)
			if err == nil {
				_, err = q.Claim(worker, 2*lease) // another process, another call
			}
			return mine, err
		}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := srv.DB(t)
			open := func() (store.Store, error) { return dial.OpenContext(context.Background(), url, dial.Options{}) }
			st, err := open()
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			tm, err := st.Team("t")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tm.Tasks().Add([]protocol.Task{{ID: "a", Title: "a"}, {ID: "b", Title: "b"}, {ID: "c", Title: "c"}}); err != nil {
				t.Fatal(err)
			}
			agentSide, clientSide := socketPair(t)
			serve(t, context.Background(), agentSide, tasksOf{st, func(q store.Tasks) store.Tasks {
				return claimThenDie{q, func(ctx context.Context, worker string, lease time.Duration) (*protocol.Task, error) {
					defer agentSide.Close()
					return tc.claim(q, ctx, worker, lease)
				}}
			}})
			ct := clientTeam(t, clientSide.(Conn), Options{Direct: open})
			got, err := ct.Tasks().Claim("w1", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			held, err := tm.Tasks().List(queue.ListOptions{Status: []string{protocol.StatusClaimed}})
			if err != nil {
				t.Fatal(err)
			}
			var desc []string
			for _, h := range held {
				desc = append(desc, fmt.Sprintf("%s (token %d, id %q)", h.ID, h.Claim.Token, h.Claim.ID))
			}
			// The lost call claimed a: the command prints a, and no task
			// but those of the calls made is held.
			if got.ID != "a" || len(held) != tc.held {
				t.Errorf("the command printed %s; claimed: %v", got.ID, desc)
			}
		})
	}
}

// claimThenDie runs claim in place of the agent's claim.
type claimThenDie struct {
	store.Tasks
	claim func(ctx context.Context, worker string, lease time.Duration) (*protocol.Task, error)
}

func (q claimThenDie) WaitClaim(ctx context.Context, worker string, lease, wait time.Duration) (*protocol.Task, error) {
	return q.claim(ctx, worker, lease)
}
