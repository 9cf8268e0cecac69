package jsonl

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"
)

// FollowOptions tune a Follower.
type FollowOptions struct {
	FromStart bool          // read the file from its start, not its end
	Poll      time.Duration // how often to look for new data; default 50ms
}

// Follower reads lines appended to a file, like `tail -F`: it waits for a
// file that does not exist yet, starts over when the file is truncated and
// switches to the new file when it is replaced (after draining the old
// one). A line is returned only once its newline has been written.
type Follower struct {
	path      string
	poll      time.Duration
	fromStart bool
	f         *os.File
	off       int64
	buf       []byte
	chunk     []byte
	// tail holds the last bytes read before off. After an idle poll they
	// must still be there: a file truncated and written past off again
	// between two polls would otherwise be read from the middle.
	tail []byte
	idle bool
}

// tailLen is how many bytes before the offset identify the file's content.
const tailLen = 64

// Follow starts following path. Nothing is opened until the first Next.
func Follow(path string, opts FollowOptions) *Follower {
	if opts.Poll <= 0 {
		opts.Poll = 50 * time.Millisecond
	}
	return &Follower{path: path, poll: opts.Poll, fromStart: opts.FromStart, chunk: make([]byte, 64<<10)}
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

// Offset is the byte offset in the current file up to which lines were
// returned.
func (fl *Follower) Offset() int64 { return fl.off - int64(len(fl.buf)) }

// Next returns the next whole line without its newline. It blocks until one
// is there or ctx ends. The slice is valid until the next call.
func (fl *Follower) Next(ctx context.Context) ([]byte, error) {
	for {
		if i := bytes.IndexByte(fl.buf, '\n'); i >= 0 {
			line := fl.buf[:i]
			fl.buf = fl.buf[i+1:]
			return bytes.TrimSuffix(line, []byte{'\r'}), nil
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
		f, err := os.Open(fl.path)
		if errors.Is(err, fs.ErrNotExist) {
			// Once we waited for the file, it is read from the start.
			fl.fromStart = true
			return false, nil
		}
		if err != nil {
			return false, err
		}
		fl.f, fl.off = f, 0
		if !fl.fromStart {
			if fl.off, err = f.Seek(0, io.SeekEnd); err != nil {
				return false, err
			}
		}
		fl.fromStart = true
		return true, nil
	}
	// Keep buf compact so a long stream does not grow it.
	if len(fl.buf) == 0 {
		fl.buf = fl.buf[:0:0]
	}
	n, err := fl.f.ReadAt(fl.chunk, fl.off)
	if n > 0 && fl.idle && len(fl.tail) > 0 {
		fl.idle = false
		if !fl.sameTail() {
			fl.off, fl.buf, fl.tail = 0, nil, nil
			return true, nil
		}
	}
	if n > 0 {
		fl.off += int64(n)
		fl.buf = append(fl.buf, fl.chunk[:n]...)
		fl.keepTail(fl.chunk[:n])
		return true, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	// At the end of the open file: has it been truncated or replaced?
	cur, err := fl.f.Stat()
	if err != nil {
		return false, err
	}
	if cur.Size() < fl.off {
		fl.off, fl.buf, fl.tail = 0, nil, nil
		return true, nil
	}
	st, err := os.Stat(fl.path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !os.SameFile(st, cur)) {
		fl.f.Close()
		fl.f, fl.off, fl.buf, fl.tail = nil, 0, nil, nil
		return true, nil
	}
	fl.idle = true
	return false, nil
}

// keepTail remembers the last tailLen bytes read.
func (fl *Follower) keepTail(read []byte) {
	if len(read) >= tailLen {
		fl.tail = append(fl.tail[:0], read[len(read)-tailLen:]...)
		return
	}
	fl.tail = append(fl.tail, read...)
	if over := len(fl.tail) - tailLen; over > 0 {
		fl.tail = append(fl.tail[:0], fl.tail[over:]...)
	}
}

// sameTail reports whether the bytes before off are still the ones read.
func (fl *Follower) sameTail() bool {
	got := make([]byte, len(fl.tail))
	n, _ := fl.f.ReadAt(got, fl.off-int64(len(fl.tail)))
	return n == len(got) && bytes.Equal(got, fl.tail)
}

// Close releases the open file.
func (fl *Follower) Close() error {
	if fl.f == nil {
		return nil
	}
	err := fl.f.Close()
	fl.f = nil
	return err
}
