package filestore

import (
	"context"
	"sync"
	"time"

	"github.com/powerglide/powerglide/pkg/jsonl"
	"github.com/powerglide/powerglide/pkg/store"
)

// Journal is events.jsonl.
type Journal struct{ team *Team }

var _ store.Journal = (*Journal)(nil)

// Append appends the records to events.jsonl in one write under its flock,
// creating the team directory with the first one.
func (j *Journal) Append(_ context.Context, records ...any) error {
	if len(records) == 0 {
		return nil
	}
	if err := j.team.dir.Ensure(); err != nil {
		return err
	}
	return jsonl.Append(j.team.dir.Events(), records...)
}

// SettleQuiet is how long a follower lets task-queue.json rest after a
// change before it settles it.
const SettleQuiet = time.Second

// Follow follows events.jsonl like tail -F. While it runs it also settles
// the queue when it has been quiet (queue.SettleWhenQuiet): a writer killed
// after committing a change but before journaling it leaves its events for
// the next change, and on a quiet team the follower appends them itself.
func (j *Journal) Follow(ctx context.Context, fromStart bool) (store.Follower, error) {
	f := &follower{fl: jsonl.Follow(j.team.dir.Events(), jsonl.FollowOptions{FromStart: fromStart})}
	// The end is where the call finds it, not where the first Next does.
	if err := f.fl.Start(); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	f.stop = cancel
	f.settled = make(chan struct{})
	go func() {
		defer close(f.settled)
		j.team.q.SettleWhenQuiet(sctx, SettleQuiet, j.team.onSettle)
	}()
	return f, nil
}

type follower struct {
	fl      *jsonl.Follower
	stop    context.CancelFunc
	settled chan struct{}
	once    sync.Once
}

// Next returns the next line, copied: the caller may keep it.
func (f *follower) Next(ctx context.Context) ([]byte, error) {
	line, err := f.fl.Next(ctx)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), line...), nil
}

// Close stops the settling and closes the file.
func (f *follower) Close() error {
	f.once.Do(func() {
		f.stop()
		<-f.settled
	})
	return f.fl.Close()
}
