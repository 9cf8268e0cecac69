package pgstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// TestChannelNames: the channel SQL's team_channel names (for psql users
// who LISTEN) is the one Go notifies and listens on, for short names and
// for names too long for a channel; a waiting claim on a long-named team
// wakes on an add.
func TestChannelNames(t *testing.T) {
	url := pgtest.DB(t)
	s, err := pgstore.OpenStore(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	long := strings.Repeat("team-", 20)
	for _, team := range []string{"t", "a.b_c-9", long} {
		var sql string
		if err := conn.QueryRow(t.Context(), "SELECT team_channel($1)", team).Scan(&sql); err != nil {
			t.Fatal(err)
		}
		if got := pgstore.Channel(team); got != sql || len(got) > 63 {
			t.Fatalf("team %q: Go uses %q, SQL's team_channel says %q", team, got, sql)
		}
	}
	tm, err := s.Team(long)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		tm.Tasks().Add([]protocol.Task{{ID: "x", Title: "x"}})
	}()
	start := time.Now()
	got, err := tm.Tasks().WaitClaim(t.Context(), "w", time.Minute, 30*time.Second)
	if err != nil || got.ID != "x" {
		t.Fatalf("wait: %v %+v", err, got)
	}
	t.Logf("claimed %v after the wait began (the add came at 300ms)", time.Since(start))
}
