package jsonl

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/powerglide/powerglide/pkg/atomicfile"
)

// FollowOptions tune a Follower.
type FollowOptions struct {
	FromStart bool          // read the file from its start, not its end
	Poll      time.Duration // how often to look for new data; default 50ms
}

// followChunk caps one read of a Follower.
const followChunk = 64 << 10

// Follower reads lines appended to a file, like `tail -F`: it waits for a
// file that does not exist yet, starts over when the file is truncated or
// rewritten in place and switches to the new file when it is replaced
// (after draining the old one). A line is returned only once its newline
// has been written; blank lines are left out. It reads through ReadFrom's
// position (Pos), keeping the file open between reads.
type Follower struct {
	poll      time.Duration
	fromStart bool
	f         *os.File
	pos       Pos
	lines     [][]byte
}

// Follow starts following path. Nothing is opened until the first Next.
func Follow(path string, opts FollowOptions) *Follower {
	if opts.Poll <= 0 {
		opts.Poll = 50 * time.Millisecond
	}
	return &Follower{poll: opts.Poll, fromStart: opts.FromStart, pos: Pos{Path: path}}
}

// Start opens the file now, when it exists, rather than at the first
// Next: a follower that starts at the end then returns every line
// appended after Start, even those appended before its first Next.
func (fl *Follower) Start() error {
	if fl.f != nil {
		return nil
	}
	_, err := fl.step()
	return err
}

// Next returns the next whole line without its newline. It blocks until one
// is there or ctx ends. The slice is valid until the next call.
func (fl *Follower) Next(ctx context.Context) ([]byte, error) {
	for {
		if len(fl.lines) > 0 {
			line := fl.lines[0]
			fl.lines = fl.lines[1:]
			return line, nil
		}
		progressed, err := fl.step()
		if err != nil {
			return nil, err
		}
		if progressed {
			continue
		}
		t := time.NewTimer(fl.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// step reads what is there; it reports whether anything changed.
func (fl *Follower) step() (bool, error) {
	if fl.f == nil {
		f, err := atomicfile.Open(fl.pos.Path)
		if errors.Is(err, fs.ErrNotExist) {
			// Once we waited for the file, it is read from the start.
			fl.fromStart = true
			return false, nil
		}
		if err != nil {
			return false, err
		}
		fl.f = f
		if !fl.fromStart && !fl.pos.Open {
			if fl.pos, err = atEnd(f, fl.pos.Path); err != nil {
				return false, err
			}
		}
		fl.fromStart = true
		return true, nil
	}
	r, err := readOpen(fl.f, fl.pos, 0, followChunk)
	if err != nil {
		return false, err
	}
	moved := r.Pos.Off != fl.pos.Off || r.Reset != ""
	fl.pos, fl.lines = r.Pos, r.Lines
	if moved {
		return true, nil
	}
	// At the end of the open file: has it been replaced or removed?
	cur, err := fl.f.Stat()
	if err != nil {
		return false, err
	}
	st, err := os.Stat(fl.pos.Path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !os.SameFile(st, cur)) {
		fl.f.Close()
		fl.f, fl.pos = nil, Pos{Path: fl.pos.Path, Gone: true}
		return true, nil
	}
	return false, nil
}

// Close releases the open file. A Next after Close opens it again and goes
// on from where the follower was.
func (fl *Follower) Close() error {
	if fl.f == nil {
		return nil
	}
	err := fl.f.Close()
	fl.f = nil
	return err
}
