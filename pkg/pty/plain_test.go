package pty

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A pattern written from the text a reader saw (escape sequences removed)
// matches with Plain, though the raw bytes have a colour change inside the
// word; next_offset is the raw offset just past the match. Before, --wait
// matched only the raw bytes.
func TestReadWaitPlain(t *testing.T) {
	s := newStore(t)
	startSession(t, s, "c", nil, "sh", "-c", `printf 'st\033[1;32mar\033[0mted\n\033]0;title\007> '; read x; echo "got $x"; sleep 30`)
	out, err := s.Read(context.Background(), "c", ReadOptions{Since: 0, HasSince: true, Wait: regexp.MustCompile(`started\n> $`), Timeout: 30 * time.Second, Plain: true})
	if err != nil || !out.Matched {
		t.Fatalf("plain wait: %v %+v", err, out)
	}
	if out.Data != "started\n> " {
		t.Errorf("data = %q", out.Data)
	}
	raw := "st\x1b[1;32mar\x1b[0mted\r\n\x1b]0;title\x07> "
	if out.NextOffset != int64(len(raw)) {
		t.Errorf("next_offset = %d, want %d (just past the match in output.log)", out.NextOffset, len(raw))
	}
	// The same pattern on the raw bytes does not match.
	if out, err := s.Read(context.Background(), "c", ReadOptions{Since: 0, HasSince: true, Wait: regexp.MustCompile(`started`)}); err == nil || out.Matched {
		t.Errorf("raw wait matched across escape sequences: %+v", out)
	}
	send(t, s, "c", "x\n")
	out, err = s.Read(context.Background(), "c", ReadOptions{Wait: regexp.MustCompile(`got x`), Timeout: 30 * time.Second, Plain: true})
	if err != nil || !strings.HasSuffix(out.Data, "got x") {
		t.Errorf("the next plain wait from the cursor: %v %+v", err, out)
	}
}
