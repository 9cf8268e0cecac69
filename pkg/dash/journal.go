package dash

import (
	"context"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/powerglide/powerglide/pkg/store"
)

// A team kept in files has its journal read with the rest of a load
// (jsonl.ReadFrom on events.jsonl, see Loader.Load). A team in another store has
// it followed through the store (store.Journal.Follow): every event once,
// in order, from the first, by a goroutine that the model drains with
// journalFeed.next.

// journalFeed follows a store's journal.
type journalFeed struct {
	cancel context.CancelFunc
	ch     chan journalItem
	done   chan struct{} // closed when the goroutine has closed its follower
}

type journalItem struct {
	line []byte
	err  error
}

// journalMsg is a batch of journal lines.
type journalMsg struct {
	lines   []JournalLine
	invalid []string
	err     error
	ended   bool
}

// journalBatch bounds the lines one message carries.
const journalBatch = 512

func startJournal(t store.Team) *journalFeed {
	ctx, cancel := context.WithCancel(context.Background())
	f := &journalFeed{cancel: cancel, ch: make(chan journalItem, journalBatch), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer close(f.ch)
		fl, err := t.Journal().Follow(ctx, true)
		if err != nil {
			f.ch <- journalItem{err: err}
			return
		}
		defer fl.Close()
		for {
			line, err := fl.Next(ctx)
			if ctx.Err() != nil {
				return
			}
			select {
			case f.ch <- journalItem{line: line, err: err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return f
}

// next waits for the next lines.
func (f *journalFeed) next() tea.Cmd {
	return func() tea.Msg {
		var msg journalMsg
		it, ok := <-f.ch
		for ok {
			if it.err != nil {
				msg.err = it.err
				break
			}
			if jl, err := journalLine(it.line); err != nil {
				msg.invalid = append(msg.invalid, err.Error())
			} else {
				msg.lines = append(msg.lines, jl)
			}
			if len(msg.lines)+len(msg.invalid) >= journalBatch {
				return msg
			}
			select {
			case it, ok = <-f.ch:
				continue
			default:
			}
			return msg
		}
		msg.ended = true
		return msg
	}
}

// close stops the follower and waits until it is closed: a file store's
// follower settles the queue in the background, and must not write into the
// team directory after the dashboard has let it go.
func (f *journalFeed) close() {
	f.cancel()
	<-f.done
}

// applyJournal folds followed journal lines into the model.
func (m *Model) applyJournal(msg journalMsg) tea.Cmd {
	if m.started.IsZero() && len(msg.lines) > 0 {
		m.started = msg.lines[0].TS
	}
	m.journal = append(m.journal, msg.lines...)
	if len(m.journal) > 200 {
		m.journal = append([]JournalLine(nil), m.journal[len(m.journal)-100:]...)
	}
	for _, e := range msg.invalid {
		m.warnLine("journal", e)
	}
	if msg.err != nil {
		m.setStatus("journal: "+msg.err.Error(), "bad")
	}
	if msg.ended {
		return nil
	}
	return m.jfeed.next()
}

// FirstJournalTS is the time of a store's first journal event, or zero
// when it has none within wait.
func FirstJournalTS(ctx context.Context, t store.Team, wait time.Duration) time.Time {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	fl, err := t.Journal().Follow(ctx, true)
	if err != nil {
		return time.Time{}
	}
	defer fl.Close()
	line, err := fl.Next(ctx)
	if err != nil {
		return time.Time{}
	}
	jl, err := journalLine(line)
	if err != nil {
		return time.Time{}
	}
	return jl.TS
}
