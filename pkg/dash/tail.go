package dash

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// TailPos is how far an append-only file has been read. It is a value: a
// read takes one and returns the next, so the reading can run in a tea.Cmd
// while the model keeps the position.
type TailPos struct {
	Path    string
	Off     int64  // bytes consumed from the current file
	Dev     uint64 // identity of the file read, to notice a replacement
	Ino     uint64
	Partial []byte // an unfinished last line, kept until its newline
	Head    []byte // the file's first bytes, to notice it was rewritten in place
	Open    bool   // the file has been read at least once
	Gone    bool   // the file was read, then went away: its successor is new
}

// TailRead is what one read found.
type TailRead struct {
	Pos   TailPos
	Lines [][]byte
	// Reset is set when the file was replaced (rotated) or truncated: the
	// reader started over, and earlier lines may have been missed.
	Reset   string
	Missing bool // the file does not exist (yet)
	More    bool // the read stopped at maxRead; call again
}

// Tail limits.
const (
	// tailBacklog is how much of an existing file a first read looks at:
	// the dashboard shows recent events, not a whole day's log.
	tailBacklog = 512 << 10
	// tailChunk caps one read, so a burst never stalls the UI.
	tailChunk = 4 << 20
)

// ReadTail reads what was appended to pos.Path since pos. A file read for
// the first time is read from its last backlog bytes (0 = from the start),
// beginning at a whole line.
func ReadTail(pos TailPos, backlog int64) (TailRead, error) {
	r := TailRead{Pos: pos}
	f, err := os.Open(pos.Path)
	if errors.Is(err, fs.ErrNotExist) {
		if pos.Open {
			r.Reset = "removed"
		}
		r.Pos = TailPos{Path: pos.Path, Gone: pos.Open || pos.Gone}
		r.Missing = true
		return r, nil
	}
	if err != nil {
		return r, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return r, err
	}
	dev, ino := fileID(st)
	skipFirst := false
	switch {
	case !pos.Open && pos.Gone:
		r.Reset = "rotated"
		r.Pos = TailPos{Path: pos.Path, Dev: dev, Ino: ino, Open: true}
	case !pos.Open:
		r.Pos = TailPos{Path: pos.Path, Dev: dev, Ino: ino, Open: true}
		if backlog > 0 && st.Size() > backlog {
			r.Pos.Off = st.Size() - backlog
			skipFirst = true
		}
	case dev != pos.Dev || ino != pos.Ino:
		r.Reset = "rotated"
		r.Pos = TailPos{Path: pos.Path, Dev: dev, Ino: ino, Open: true}
	case st.Size() < pos.Off || !sameHead(f, pos.Head):
		// Shorter than what was read, or rewritten from the start (a
		// truncation followed by more writes than before).
		r.Reset = "truncated"
		r.Pos = TailPos{Path: pos.Path, Dev: dev, Ino: ino, Open: true}
	}
	if len(r.Pos.Head) < headLen && st.Size() > int64(len(r.Pos.Head)) {
		h := make([]byte, min(int64(headLen), st.Size()))
		if n, err := f.ReadAt(h, 0); err == nil || errors.Is(err, io.EOF) {
			r.Pos.Head = h[:n]
		}
	}
	n := st.Size() - r.Pos.Off
	if n <= 0 {
		return r, nil
	}
	if n > tailChunk {
		n, r.More = tailChunk, true
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, r.Pos.Off)
	if err != nil && !errors.Is(err, io.EOF) {
		return r, err
	}
	buf = buf[:got]
	r.Pos.Off += int64(got)
	if skipFirst {
		// Started inside a line: drop up to the first newline.
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			r.Pos.Partial = nil
			return r, nil
		}
		buf = buf[i+1:]
	}
	data := buf
	if len(r.Pos.Partial) > 0 {
		data = append(append([]byte(nil), r.Pos.Partial...), buf...)
	}
	r.Pos.Partial = nil
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			r.Pos.Partial = append([]byte(nil), data...)
			break
		}
		line := bytes.TrimRight(data[:i], "\r")
		if len(bytes.TrimSpace(line)) > 0 {
			r.Lines = append(r.Lines, line)
		}
		data = data[i+1:]
	}
	return r, nil
}

// headLen is how much of a file's start identifies it.
const headLen = 64

func sameHead(f *os.File, head []byte) bool {
	if len(head) == 0 {
		return true
	}
	b := make([]byte, len(head))
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return true // cannot tell; keep reading
	}
	return bytes.Equal(b[:n], head)
}

func fileID(st fs.FileInfo) (uint64, uint64) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Dev), uint64(s.Ino)
	}
	return 0, 0
}
