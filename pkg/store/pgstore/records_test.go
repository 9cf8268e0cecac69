package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/powerglide/powerglide/pkg/protocol"
	"github.com/powerglide/powerglide/pkg/queue"
	"github.com/powerglide/powerglide/pkg/store"
	"github.com/powerglide/powerglide/pkg/store/filestore"
	"github.com/powerglide/powerglide/pkg/store/pgstore"
	"github.com/powerglide/powerglide/pkg/store/pgtest"
)

// script drives a team through the life of a few tasks.
func script(t *testing.T, tm store.Team) {
	t.Helper()
	q := tm.Tasks()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(q.Add([]protocol.Task{
		{ID: "a", Title: "a", Prompt: "line one\nline <two> & \"three\" é", Priority: 2, Labels: map[string]string{"z": "1", "a": "2"},
			Verify: "go test ./...", Extra: map[string]json.RawMessage{"x_b": json.RawMessage(`[1, {"k": "v"}]`), "x_a": json.RawMessage(`true`)}},
		{ID: "b", Title: "b", DependsOn: []string{"a"}, MaxAttempts: 2},
		{ID: "c", Title: "c"},
		{ID: "d", Title: "d"},
	}))
	a, err := q.Claim("w1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	must(q.Renew("a", a.Claim.Token, 2*time.Minute))
	must(q.Complete("a", a.Claim.Token, json.RawMessage(`{"files": ["x.go"], "note": "<ok>"}`)))
	c, _ := q.Claim("w2", time.Minute)
	must(q.Fail(c.ID, c.Claim.Token, "it broke: \"bad\"", true))
	b, _ := q.Claim("w1", time.Minute)
	must(q.Release(b.ID, b.Claim.Token))
	must(q.Claim("w3", time.Minute))
	must(q.Cancel("d", "not needed"))
	must(q.ReleaseWorker("w3", "worker stopped", 0))
	must(q.Archive(0))
	if _, err := q.Show("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Complete("zz", 1, nil); !errors.Is(err, queue.ErrNotFound) {
		t.Fatal(err)
	}
	// Leases that run out: e on its last attempt fails, g is claimed again.
	must(q.Add([]protocol.Task{{ID: "e", Title: "e", MaxAttempts: 1, Priority: 9}, {ID: "g", Title: "g", Priority: 8}}))
	must(q.Claim("w4", 400*time.Millisecond))
	must(q.Claim("w4", 400*time.Millisecond))
	time.Sleep(900 * time.Millisecond)
	if g, err := q.Claim("w5", time.Minute); err != nil || g.ID != "g" {
		t.Fatalf("claim after expiry: %v %+v", err, g)
	}
}

var stamps = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

func mask(s string) string { return stamps.ReplaceAllString(s, "T") }

func records(t *testing.T, tm store.Team) (tasks, journal string) {
	t.Helper()
	ts, err := tm.Tasks().List(queue.ListOptions{Archived: true})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range ts {
		js, err := queue.EncodeTask(&ts[i])
		if err != nil {
			t.Fatal(err)
		}
		b.Write(js)
		b.WriteByte('\n')
	}
	// The journal is read up to a mark appended now, not until a pause: a
	// slow follower loses nothing.
	const end = `{"type":"test_end"}`
	if err := tm.Journal().Append(t.Context(), json.RawMessage(end)); err != nil {
		t.Fatal(err)
	}
	f, err := tm.Journal().Follow(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var j strings.Builder
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		line, err := f.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("read the journal: %v", err)
		}
		if string(line) == end {
			break
		}
		j.Write(line)
		j.WriteByte('\n')
	}
	return mask(b.String()), mask(j.String())
}

// TestRecordsMatchFileStore: the same changes give the same task records
// and the same journal, byte for byte but for the times, on both stores.
func TestRecordsMatchFileStore(t *testing.T) {
	fs := filestore.Open(t.TempDir(), filestore.Options{NoSync: true})
	defer fs.Close()
	ps, err := pgstore.OpenStore(t.Context(), pgtest.DB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	ftm, _ := fs.Team("t")
	ptm, _ := ps.Team("t")
	script(t, ftm)
	script(t, ptm)
	ft, fj := records(t, ftm)
	pt, pj := records(t, ptm)
	if ft != pt {
		t.Errorf("task records differ\nfile:\n%s\npostgres:\n%s", ft, pt)
	}
	if fj != pj {
		t.Errorf("journals differ\nfile:\n%s\npostgres:\n%s", fj, pj)
	}
	if !strings.Contains(pt, `"x_a":true,"x_b":[1,{"k":"v"}]`) || strings.Count(pj, "\n") < 10 {
		t.Fatalf("records:\n%s\n%s", pt, pj)
	}
}
