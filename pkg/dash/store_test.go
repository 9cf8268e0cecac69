package dash

import (
	"context"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/proc"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/filestore"
	"github.com/powerglide/powerglide/pkg/teamdir"
)

// opaque hides that a team lives in files: the dashboard reads it as it
// reads a PostgreSQL team, through the store's interface alone.
type opaque struct{ store.Team }

// TestLoadThroughStore: a team in a store other than files is loaded
// through store.Team (tasks with blocked ones marked, archived counts,
// workers, the operator's velocity, the budget) and its journal followed
// through store.Journal.
func TestLoadThroughStore(t *testing.T) {
	home := t.TempDir()
	fs := filestore.Open(home, filestore.Options{KeepFinished: 1})
	defer fs.Close()
	ft, err := fs.Team("t")
	if err != nil {
		t.Fatal(err)
	}
	tm := opaque{ft}
	ctx := context.Background()
	if _, err := tm.Tasks().Add([]protocol.Task{{ID: "a", Title: "a"}, {ID: "b", Title: "b"}, {ID: "c", Title: "c", DependsOn: []string{"x"}}, {ID: "x", Title: "x"}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		k, err := tm.Tasks().Claim("1", time.Minute)
		if err != nil || k.ID != id {
			t.Fatalf("claim %s: %v %v", id, k, err)
		}
		if _, err := tm.Tasks().Complete(k.ID, k.Claim.Token, nil); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	if err := tm.Workers().Write(ctx, &protocol.Worker{Worker: "1", Host: "elsewhere", State: "executing", HeartbeatAt: now.Add(-time.Hour), Velocity: 1}); err != nil {
		t.Fatal(err)
	}
	if err := tm.Workers().SetVelocity(ctx, "1", 0.25); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.Budget().Update(ctx, func(*protocol.TeamBudget) (*protocol.TeamBudget, error) {
		return &protocol.TeamBudget{Type: "team_budget", Version: 1, BudgetUSD: 2, SpentUSD: 0.5}, nil
	}); err != nil {
		t.Fatal(err)
	}

	l := Loader{Dir: teamdir.Dir{Home: t.TempDir(), Team: "t"}, Team: tm, Host: proc.Host{Name: "here"}}
	if l.Files() {
		t.Fatal("an opaque store taken for files")
	}
	r := l.Load(jsonl.Pos{}, now)
	s := r.Snap
	if len(s.Problems) != 0 {
		t.Fatalf("problems: %+v", s.Problems)
	}
	if !s.DirExists || !s.QueueExists {
		t.Fatal("the team is not seen")
	}
	c := s.Counts()
	if c.Done != 2 || c.Pending != 1 || c.Blocked != 1 || c.Archived < 1 || c.Total != 4 || len(s.Tasks)+c.Archived != 4 {
		t.Fatalf("counts %+v (live %d tasks, archived %v)", c, len(s.Tasks), s.Archived)
	}
	if len(s.Workers) != 1 || s.Workers[0].Velocity() != 0.25 || s.Workers[0].Alive != AliveUnknown {
		t.Fatalf("workers %+v", s.Workers)
	}
	if s.Budget == nil || s.Budget.BudgetUSD != 2 {
		t.Fatalf("budget %+v", s.Budget)
	}
	rec := Record(&s, now, 30*time.Second, nil)
	if !rec.Workers[0].Stale {
		t.Fatal("another host's old heartbeat is not stale")
	}

	// The journal, followed: every event from the first.
	m := New(Options{Dir: l.Dir, Team: tm, Now: func() time.Time { return now }})
	defer m.Close()
	m.jfeed = startJournal(tm)
	var lines []JournalLine
	for len(lines) < 8 {
		msg := m.jfeed.next()().(journalMsg)
		if msg.err != nil || msg.ended {
			t.Fatalf("journal after %d lines: %+v", len(lines), msg)
		}
		m.applyJournal(msg)
		lines = append(lines, msg.lines...)
	}
	if m.started.IsZero() || len(m.journal) != len(lines) || lines[0].TS.After(lines[len(lines)-1].TS) {
		t.Fatalf("journal: started %v, %d lines", m.started, len(m.journal))
	}
}
